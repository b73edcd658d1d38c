extension String {
    /// This text with each character found in `replacements` replaced by its escape, in one
    /// pass (linear time); the escaper of the small formats that need only a few characters
    /// changed: XML text in GPX files, SQLite's `file:` URIs. JSON has its own, faster one
    /// (``JSONString``).
    package func escaping(_ replacements: [Character: String]) -> String {
        var escaped = ""
        escaped.reserveCapacity(utf8.count)
        for character in self {
            if let replacement = replacements[character] { escaped += replacement } else { escaped.append(character) }
        }
        return escaped
    }
}
