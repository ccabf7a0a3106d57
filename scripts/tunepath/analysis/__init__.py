"""Parsed runs → frames and what is read from them: statistics, noise flags, sweeps, run comparison."""
