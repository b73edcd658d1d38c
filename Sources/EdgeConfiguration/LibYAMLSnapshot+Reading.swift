import Configuration

extension LibYAMLSnapshot {
    /// Turns libyaml's events into the snapshot's flat values: one document, a mapping at the
    /// top, nested mappings flattened to dot-separated keys, sequences of scalars as arrays.
    ///
    /// Recursion follows the nesting of mappings, which ``LibYAMLSnapshot/maximumDepth``
    /// bounds.
    struct DocumentReader: ~Copyable {
        private var events: YAMLEventParser
        private let secretsSpecifier: SecretsSpecifier<String, Void>
        private var values: [String: Entry] = [:]

        /// A reader of `input`, which must outlive it.
        init(input: UnsafeRawBufferPointer, secretsSpecifier: SecretsSpecifier<String, Void>) throws(Failure) {
            self.events = try YAMLEventParser(input: input)
            self.secretsSpecifier = secretsSpecifier
        }

        /// Reads the whole stream: exactly one document, whose top level is a mapping.
        consuming func read() throws(Failure) -> [String: Entry] {
            _ = try events.next()  // stream start
            let document = try events.next()
            if case .streamEnd = document.kind {
                throw Failure("the file holds no YAML, only comments or blank lines; expected a mapping of keys to values")
            }
            let root = try events.next()
            switch root.kind {
            case .mappingStart(let anchor):
                try refuse(anchor: anchor, at: root, path: [])
                try readMapping(path: [], depth: 1)
            case .alias(let name):
                throw Self.alias(name, at: root, path: [])
            default:
                throw Failure("the top level is not a mapping of keys to values", line: root.line, column: root.column)
            }
            _ = try events.next()  // document end
            let end = try events.next()
            if case .documentStart = end.kind {
                throw Failure("a second YAML document; the file must hold one", line: end.line, column: end.column)
            }
            return values
        }

        /// Reads key–value pairs up to the end of the mapping whose start was just read.
        private mutating func readMapping(path: [String], depth: Int) throws(Failure) {
            while true {
                guard
                    let key = try nextScalar(
                        until: .mappingEnd, path: path,
                        nested: "a key in \(Self.describe(path)) is a mapping or a list; keys must be single values")
                else { return }
                let keyPath = path + [key.text]
                let valueEvent = try events.next()
                switch valueEvent.kind {
                case .scalar(let scalar, let anchor):
                    try refuse(anchor: anchor, at: valueEvent, path: keyPath)
                    store(.scalar(scalar), at: keyPath, event: valueEvent)
                case .mappingStart(let anchor):
                    try refuse(anchor: anchor, at: valueEvent, path: keyPath)
                    guard depth < LibYAMLSnapshot.maximumDepth else {
                        throw Failure(
                            "\(Self.describe(keyPath)) is nested more than \(LibYAMLSnapshot.maximumDepth) mappings deep",
                            line: valueEvent.line, column: valueEvent.column)
                    }
                    try readMapping(path: keyPath, depth: depth + 1)
                case .sequenceStart(let anchor):
                    try refuse(anchor: anchor, at: valueEvent, path: keyPath)
                    store(.sequence(try readSequence(path: keyPath)), at: keyPath, event: valueEvent)
                case .alias(let name):
                    throw Self.alias(name, at: valueEvent, path: keyPath)
                default:
                    throw Failure("unexpected YAML event at \(Self.describe(keyPath))", line: valueEvent.line, column: valueEvent.column)
                }
            }
        }

        /// Reads the scalars up to the end of the sequence whose start was just read.
        private mutating func readSequence(path: [String]) throws(Failure) -> [YAMLScalar] {
            var items: [YAMLScalar] = []
            while let item = try nextScalar(
                until: .sequenceEnd, path: path,
                nested: "item \(items.count + 1) of the list \(Self.describe(path)) is a mapping or a list; a list holds single values only"
            ) {
                items.append(item)
            }
            return items
        }

        /// The next event's single value, or `nil` at `end`; an anchor, an alias, or a mapping or
        /// list where a single value belongs (`nested` says which) is refused.
        private mutating func nextScalar(
            until end: YAMLEvent.Kind, path: [String], nested: @autoclosure () -> String
        ) throws(Failure) -> YAMLScalar? {
            let event = try events.next()
            switch event.kind {
            case end:
                return nil
            case .scalar(let scalar, let anchor):
                try refuse(anchor: anchor, at: event, path: path)
                return scalar
            case .alias(let name):
                throw Self.alias(name, at: event, path: path)
            default:
                throw Failure(nested(), line: event.line, column: event.column)
            }
        }

        /// Records a value, asking the secrets specifier about its key. A key given twice keeps
        /// its last value, as with Yams.
        private mutating func store(_ value: Value, at path: [String], event: YAMLEvent) {
            let key = path.joined(separator: ".")
            let isSecret = secretsSpecifier.isSecret(key: key, value: ())
            values[key] = Entry(value: value, isSecret: isSecret, line: event.line, column: event.column)
        }

        private func refuse(anchor: String?, at event: YAMLEvent, path: [String]) throws(Failure) {
            guard let anchor else { return }
            throw Failure(
                "an anchor (&\(anchor)) at \(Self.describe(path)): anchors and aliases are not supported; write each value out",
                line: event.line, column: event.column)
        }

        private static func alias(_ name: String, at event: YAMLEvent, path: [String]) -> Failure {
            Failure(
                "an alias (*\(name)) at \(describe(path)): anchors and aliases are not supported; write each value out",
                line: event.line, column: event.column)
        }

        /// `broker.url`, or `the top level`.
        private static func describe(_ path: [String]) -> String {
            path.isEmpty ? "the top level" : path.joined(separator: ".")
        }
    }
}
