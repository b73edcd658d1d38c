import FleetcastCore
import Testing

@Suite struct CharacterEscapingTests {
    @Test func onlyTheListedCharactersChange() {
        let xml: [Unicode.Scalar: String] = ["&": "&amp;", "<": "&lt;", ">": "&gt;"]
        #expect("a<b>&c".escaping(xml) == "a&lt;b&gt;&amp;c")
        #expect("plain é 🚗".escaping(xml) == "plain é 🚗")
        #expect("".escaping(xml) == "")
    }

    @Test func anEscapeIsNotEscapedAgain() {
        // One pass: the `%` of "%3f" is not turned into "%25".
        #expect("a?b%".escaping(["%": "%25", "?": "%3f"]) == "a%3fb%25")
    }

    @Test func aCombiningMarkDoesNotHideTheCharacterBeforeIt() {
        // "<" and a combining long solidus are one Character (not equal to "<"), but the
        // bytes hold a "<" all the same.
        #expect("a<\u{338}b".escaping(["<": "&lt;"]) == "a&lt;\u{338}b")
        #expect("x?\u{301}".escaping(["?": "%3f"]) == "x%3f\u{301}")
        // "\r\n" is one Character and two scalars.
        #expect("a\r\nb".escaping(["\n": "\\n"]) == "a\r\\nb")
    }
}
