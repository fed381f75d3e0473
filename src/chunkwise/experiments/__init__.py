"""What the measurement scripts under ``bench/`` share: one bench cell run as an ordinary eval
run (:mod:`.cell`) and the resumable ledger of measured cells (:mod:`.ledger`)."""
