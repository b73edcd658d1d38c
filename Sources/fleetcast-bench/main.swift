// Benchmarks land here (issue 2).
