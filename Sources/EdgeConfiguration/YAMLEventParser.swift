import CYAML

/// One event of libyaml's event parser, copied out of the C event (which is freed at once).
///
/// Line and column are 1-based.
struct YAMLEvent: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case streamStart, streamEnd, documentStart, documentEnd
        /// `*name`: a reference to an anchored node.
        case alias(name: String)
        /// A scalar; `anchor` is the name of an `&name` before it.
        case scalar(YAMLScalar, anchor: String?)
        case sequenceStart(anchor: String?)
        case sequenceEnd
        case mappingStart(anchor: String?)
        case mappingEnd
    }

    var kind: Kind
    /// Where the event starts in the text (1-based).
    var line: Int
    var column: Int
}

/// The agent's one owner of a libyaml `yaml_parser_t`: reads a YAML text as a sequence of
/// ``YAMLEvent``s and frees every C allocation (each event as soon as it is copied, the parser
/// when this value ends).
///
/// The text is borrowed, not copied: use the parser only inside the `withUnsafeBytes` call
/// that produced `input`.
struct YAMLEventParser: ~Copyable {
    private let parser: UnsafeMutablePointer<yaml_parser_t>
    private let input: UnsafeRawBufferPointer

    /// A parser over `input`, which must not be empty (libyaml asserts on a null buffer) and
    /// must outlive the parser.
    init(input: UnsafeRawBufferPointer) throws(LibYAMLSnapshot.Failure) {
        guard let base = input.baseAddress, !input.isEmpty else {
            throw LibYAMLSnapshot.Failure("the file is empty; expected a mapping of keys to values")
        }
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        guard yaml_parser_initialize(parser) != 0 else {
            parser.deallocate()
            throw LibYAMLSnapshot.Failure("libyaml could not allocate its parser (out of memory)")
        }
        yaml_parser_set_input_string(parser, base.assumingMemoryBound(to: UInt8.self), input.count)
        self.parser = parser
        self.input = input
    }

    deinit {
        yaml_parser_delete(parser)
        parser.deallocate()
    }

    /// The next event; after `streamEnd` libyaml returns no more events.
    ///
    /// - Throws: a syntax error with libyaml's own words and the 1-based line and column.
    mutating func next() throws(LibYAMLSnapshot.Failure) -> YAMLEvent {
        var event = yaml_event_t()
        guard yaml_parser_parse(parser, &event) != 0 else { throw syntaxError() }
        defer { yaml_event_delete(&event) }
        let line = Int(event.start_mark.line) + 1
        let column = Int(event.start_mark.column) + 1
        let kind: YAMLEvent.Kind
        switch event.type {
        case YAML_STREAM_START_EVENT: kind = .streamStart
        case YAML_STREAM_END_EVENT: kind = .streamEnd
        case YAML_DOCUMENT_START_EVENT: kind = .documentStart
        case YAML_DOCUMENT_END_EVENT: kind = .documentEnd
        case YAML_ALIAS_EVENT: kind = .alias(name: Self.string(event.data.alias.anchor) ?? "")
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            let text =
                scalar.value.map { String(decoding: UnsafeBufferPointer(start: $0, count: scalar.length), as: UTF8.self) } ?? ""
            let tag = Self.string(scalar.tag)
            kind = .scalar(
                YAMLScalar(text, isPlain: scalar.style == YAML_PLAIN_SCALAR_STYLE && tag != YAMLScalar.stringTag),
                anchor: Self.string(scalar.anchor))
        case YAML_SEQUENCE_START_EVENT: kind = .sequenceStart(anchor: Self.string(event.data.sequence_start.anchor))
        case YAML_SEQUENCE_END_EVENT: kind = .sequenceEnd
        case YAML_MAPPING_START_EVENT: kind = .mappingStart(anchor: Self.string(event.data.mapping_start.anchor))
        case YAML_MAPPING_END_EVENT: kind = .mappingEnd
        default:
            throw LibYAMLSnapshot.Failure("libyaml returned an unknown event (\(event.type.rawValue))", line: line, column: column)
        }
        return YAMLEvent(kind: kind, line: line, column: column)
    }

    /// libyaml's description of the error it stopped at: what (`problem`), where
    /// (`problem_mark`, or the byte offset for an encoding error) and in which construct
    /// (`context`, `context_mark`).
    private func syntaxError() -> LibYAMLSnapshot.Failure {
        let state = parser.pointee
        let problem = state.problem.map { String(cString: $0) }
        switch state.error {
        case YAML_MEMORY_ERROR:
            return LibYAMLSnapshot.Failure("libyaml ran out of memory")
        case YAML_READER_ERROR:
            // The reader (invalid UTF-8, control characters) sets a byte offset, not a mark.
            var message = "unreadable text at byte \(state.problem_offset): \(problem ?? "unknown problem")"
            if state.problem_value != -1 { message += " (0x\(String(state.problem_value, radix: 16, uppercase: true)))" }
            let place = Self.lineAndColumn(of: Int(state.problem_offset), in: input)
            return LibYAMLSnapshot.Failure(message, line: place?.line, column: place?.column)
        default:
            var message = "YAML syntax error: \(problem ?? "unknown problem")"
            if let context = state.context.map({ String(cString: $0) }) {
                message +=
                    ", \(context) (line \(state.context_mark.line + 1), column \(state.context_mark.column + 1))"
            }
            return LibYAMLSnapshot.Failure(
                message, line: Int(state.problem_mark.line) + 1, column: Int(state.problem_mark.column) + 1)
        }
    }

    /// The 1-based line and column (in characters) of the byte at `offset` of UTF-8 text;
    /// `nil` for UTF-16 text (a byte order mark first), which libyaml also reads.
    private static func lineAndColumn(of offset: Int, in text: UnsafeRawBufferPointer) -> (line: Int, column: Int)? {
        guard offset <= text.count, !(text.starts(with: [0xFE, 0xFF]) || text.starts(with: [0xFF, 0xFE])) else { return nil }
        var line = 1
        var column = 1
        for byte in text[..<offset] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {  // not a UTF-8 continuation byte
                column += 1
            }
        }
        return (line, column)
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
    }
}
