"""Measuring: the evaluator (the comparison's I/O), the measurement folder, reading numbers,
secondary metrics, fingerprints, the LLM judge, repeated work, confirm and compare."""
