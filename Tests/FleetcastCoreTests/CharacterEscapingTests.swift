import FleetcastCore
import Testing

@Suite struct CharacterEscapingTests {
    @Test func onlyTheListedCharactersChange() {
        let xml: [Character: String] = ["&": "&amp;", "<": "&lt;", ">": "&gt;"]
        #expect("a<b>&c".escaping(xml) == "a&lt;b&gt;&amp;c")
        #expect("plain é 🚗".escaping(xml) == "plain é 🚗")
        #expect("".escaping(xml) == "")
    }

    @Test func anEscapeIsNotEscapedAgain() {
        // One pass: the `%` of "%3f" is not turned into "%25".
        #expect("a?b%".escaping(["%": "%25", "?": "%3f"]) == "a%3fb%25")
    }

    @Test func charactersAreWholeGraphemes() {
        // "e" followed by a combining accent is one Character, not an "e".
        #expect("e\u{301}e".escaping(["e": "E"]) == "e\u{301}E")
    }
}
