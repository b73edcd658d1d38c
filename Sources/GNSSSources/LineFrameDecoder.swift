import NIOCore

/// One line of a line-based protocol (gpsd JSON), or the marker of a line that was too long.
enum FramedLine: Sendable {
    /// A complete line without its `\n` (and `\r`).
    case line(ByteBuffer)
    /// A line longer than the limit was dropped (its bytes up to the next `\n` are skipped).
    case overlong
}

/// Splits a byte stream at `\n`, bounding the line length so that a peer that never sends a
/// newline cannot make us buffer without end.
struct LineFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = FramedLine

    /// Longest line kept, in bytes (gpsd's longest objects, SKY with many satellites, are
    /// a few kilobytes).
    let maximumLength: Int
    private var discarding = false

    init(maximumLength: Int = 32 * 1024) {
        self.maximumLength = maximumLength
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else {
            if buffer.readableBytes > maximumLength {
                // Too long already: drop what we have and everything up to the next newline.
                if !discarding {
                    discarding = true
                    context.fireChannelRead(Self.wrapInboundOut(.overlong))
                }
                buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            }
            return .needMoreData
        }
        let length = newline - buffer.readerIndex
        if discarding {
            buffer.moveReaderIndex(forwardBy: length + 1)
            discarding = false
            return .continue
        }
        guard var line = buffer.readSlice(length: length) else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: 1)
        if line.readableBytesView.last == UInt8(ascii: "\r") {
            line.moveWriterIndex(to: line.writerIndex - 1)
        }
        if length > maximumLength {
            context.fireChannelRead(Self.wrapInboundOut(.overlong))
        } else {
            context.fireChannelRead(Self.wrapInboundOut(.line(line)))
        }
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // A last line without newline is incomplete: gpsd always ends its objects with one.
        while try decode(context: context, buffer: &buffer) == .continue {}
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        return .needMoreData
    }
}
