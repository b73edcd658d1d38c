import FleetMap
import InMemoryLogging
import Logging
import NIOCore
import NIOEmbedded
import Testing

/// The write timeout on a connection, driven on NIO's embedded channel and its manual clock: on
/// loopback the kernel's send buffer takes megabytes before the server's own side backs up, so
/// a real socket would need a fleet of tens of thousands of vehicles to show it.
@Suite struct StalledWriteHandlerTests {
    func channel(timeout: TimeAmount = .seconds(30)) throws -> (EmbeddedChannel, InMemoryLogHandler) {
        let memory = InMemoryLogHandler()
        let channel = EmbeddedChannel(handler: StalledWriteHandler(timeout: timeout, logger: Logger(label: "test") { _ in memory }))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        return (channel, memory)
    }

    @Test func aConnectionUnwritableForTheTimeoutIsClosedAndLoggedOnce() throws {
        let (channel, memory) = try channel()
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: .seconds(29))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive)
        #expect(memory.entries.map(\.message.description) == ["Closed a connection whose client stopped reading"])
    }

    @Test func aClientThatReadsNowAndThenIsNeverClosed() throws {
        let (channel, memory) = try channel()
        for _ in 0..<10 {
            channel.isWritable = false
            channel.pipeline.fireChannelWritabilityChanged()
            channel.embeddedEventLoop.advanceTime(by: .seconds(20))
            // It read: the channel took more, and the clock starts over.
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        }
        #expect(channel.isActive)
        #expect(memory.entries.isEmpty)
        _ = try channel.finish()
    }

    @Test func aClosedConnectionLeavesNoTimer() throws {
        let (channel, memory) = try channel()
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        _ = try channel.finish()
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(memory.entries.isEmpty)
    }
}
