"""Load-generator reports (wrk2, wrk, ab, JMeter) into one typed WrkReport; light on purpose: `tunepath parse` imports nothing else."""
