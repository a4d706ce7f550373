"""Benchmarks of gpulease itself (`make bench`): not tests, measurements."""
