/// A YAML scalar as written, and how it reads as a whole number, a floating-point number or a
/// boolean: YAML 1.1's implicit types as Yams (swift-configuration's former YAML parser)
/// resolved them.
///
/// Only a plain scalar has an implicit type: `"007"`, `'yes'` and `!!str 5` are strings and
/// nothing else. YAML 1.1's base-60 numbers (`1:30`) are not read as numbers.
struct YAMLScalar: Sendable, Hashable {
    /// libyaml's name of the `!!str` tag.
    static let stringTag = "tag:yaml.org,2002:str"

    /// The text as written, without quotes; `""` for an empty value.
    var text: String
    /// A plain (unquoted, not block) scalar that no `!!str` tag declares a string.
    var isPlain: Bool

    init(_ text: String, isPlain: Bool) {
        self.text = text
        self.isPlain = isPlain
    }

    /// `true`, `True`, `TRUE`, `yes`, `on`… and their `false`/`no`/`off` opposites, in these
    /// three spellings only.
    var bool: Bool? {
        guard isPlain else { return nil }
        switch text {
        case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON": return true
        case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF": return false
        default: return nil
        }
    }

    /// `42`, `-7`, `+3`, `1_000`, `0x1F`, `0b101`, `0o17`, and `017` (octal, as YAML 1.1 reads
    /// a leading zero).
    var int: Int? {
        guard isPlain else { return nil }
        let digits = text.filter { $0 != "_" }
        let negative = digits.hasPrefix("-")
        let unsigned = digits.dropFirst(negative || digits.hasPrefix("+") ? 1 : 0)
        guard let first = unsigned.first, first.isASCII, first.isNumber else { return nil }
        if unsigned.allSatisfy({ $0 == "0" }) { return 0 }
        for (prefix, radix) in [("0x", 16), ("0b", 2), ("0o", 8), ("0", 8)] where unsigned.hasPrefix(prefix) {
            let rest = unsigned.dropFirst(prefix.count)
            guard let first = rest.first, first != "+", first != "-" else { return nil }
            return Int((negative ? "-" : "") + rest, radix: radix)
        }
        return Int(digits)
    }

    /// `2.5`, `-1e3`, `1_000.5`, `30`, and `.inf`, `-.inf`, `.nan` (any case).
    var double: Double? {
        guard isPlain else { return nil }
        switch text.lowercased() {
        case ".inf", "+.inf": return .infinity
        case "-.inf": return -.infinity
        case ".nan": return .nan
        default: return Double(text.filter { $0 != "_" })
        }
    }
}
