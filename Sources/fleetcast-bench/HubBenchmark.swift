func runHubBenchmark(arguments: [String]) async {}
