"""Recorded runs, the raw evidence everything shown is derived from: reading (store), recording (recorder), importing."""
