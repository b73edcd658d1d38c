import Foundation
import MQTTCore

/// A JSON text as an object, parsed with Foundation's parser (not the project's writer under
/// test).
public func jsonObject(_ text: String) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
        throw TestSupportError.notJSONObject(text)
    }
    return object
}

/// A received message's payload as the JSON object an application parses.
public func jsonObject(_ message: MQTTMessage) throws -> [String: Any] {
    try jsonObject(String(decoding: message.payload, as: UTF8.self))
}

/// The literal token of `key`'s value in a flat JSON text (`"vel":36,` → `36`), to tell an
/// integer from a number with a fraction, which JSONSerialization does not.
public func rawToken(_ key: String, in text: String) -> String? {
    guard let start = text.range(of: "\"\(key)\":")?.upperBound else { return nil }
    let rest = text[start...]
    let end = rest.firstIndex { $0 == "," || $0 == "}" } ?? rest.endIndex
    return String(rest[..<end])
}

/// Whether the token is a JSON integer (digits with an optional minus, no fraction, no exponent).
public func isIntegerToken(_ token: String?) -> Bool {
    guard let token, !token.isEmpty else { return false }
    let digits = token.hasPrefix("-") ? token.dropFirst() : Substring(token)
    return !digits.isEmpty && digits.allSatisfy(\.isASCII) && digits.allSatisfy(\.isNumber)
}
