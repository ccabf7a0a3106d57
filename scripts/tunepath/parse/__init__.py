"""Load-generator reports (wrk2, wrk, ab, siege, JMeter) into one typed WrkReport; light on purpose: `tunepath parse` imports nothing else."""
