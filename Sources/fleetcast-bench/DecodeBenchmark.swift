func runDecodeBenchmark(arguments: [String]) async {}
