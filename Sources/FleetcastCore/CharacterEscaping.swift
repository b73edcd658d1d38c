extension String {
    /// This text with each Unicode scalar found in `replacements` replaced by its escape, in
    /// one pass (linear time); the escaper of the small formats that need only a few ASCII
    /// characters changed: XML text in GPX files, SQLite's `file:` URIs. JSON has its own,
    /// faster one (``JSONString``).
    ///
    /// Scalars, not `Character`s: a `<` followed by a combining mark is one `Character` (not
    /// equal to `<`) but still a `<` byte to an XML parser, and is escaped.
    package func escaping(_ replacements: [Unicode.Scalar: String]) -> String {
        var escaped = ""
        escaped.reserveCapacity(utf8.count)
        for scalar in unicodeScalars {
            if let replacement = replacements[scalar] { escaped += replacement } else { escaped.unicodeScalars.append(scalar) }
        }
        return escaped
    }
}
