/// Finds, before toml++ sees them, the texts on which toml++ 3.4 (the parser inside TOMLKit) asserts instead of
/// reporting an error. Some of its functions assume something of the character they start at that their callers do
/// not check:
/// - a table header's key starts with a key character: not `[=]`, `[[[1]]]`, nor `[` at the end of a line;
/// - an array element does not start with `}` or a Unicode line break (U+0085, U+2028, U+2029): not `a = [}`;
/// - a value that reads as a date goes on after a space and one digit: not `a = 1979-05-27 0` and a line break;
///   and a date-time's time starts with a digit: not `a = 1979-05-27T:`.
///
/// Also refused: a NUL character, where TOMLKit would stop handing the text over (the rest of the file would be
/// ignored without a word).
///
/// The assertion aborts the process, in release builds too (SwiftPM compiles C++ without `NDEBUG`): `sleepproxyd
/// --check-config` would crash, and so would a running daemon reloading such a file. None of these texts is valid
/// TOML, so refusing them refuses nothing toml++ would have read.
///
/// The scan follows toml++ only as far as these need: strings and comments are skipped, a table header is told from
/// an array by where it starts, and a value is read as one token up to the next terminator, as toml++ looks ahead.
public struct TOMLPrecheck {
    /// Where the text goes wrong, counted as toml++ counts (lines and columns from 1, in Unicode scalars).
    public struct Problem: Error, Equatable {
        public var line: Int
        public var column: Int
        public var message: String
    }

    /// The first of those texts in `text`, if there is one.
    public static func problem(in text: String) -> Problem? {
        var scan = TOMLPrecheck(Array(text.unicodeScalars))
        do {
            try scan.run()
            return nil
        } catch {
            return error
        }
    }

    private enum Expecting {
        /// After `=`: a value, after spaces and tabs.
        case value
        /// After an array's `[` or `,`: an element (or `]`), after spaces, line breaks and comments.
        case element
    }

    private let text: [Unicode.Scalar]
    private var index = 0
    /// The open arrays (`[`) and inline tables (`{`), innermost last.
    private var open: [Unicode.Scalar] = []
    /// At the start of a line outside any array or inline table, where a table header may begin.
    private var atLineStart = true
    private var expecting: Expecting?

    private init(_ text: [Unicode.Scalar]) {
        self.text = text
        // toml++ skips a byte order mark.
        if text.first == "\u{FEFF}" { index = 1 }
    }

    private var current: Unicode.Scalar? { index < text.count ? text[index] : nil }

    private mutating func run() throws(Problem) {
        // TOMLKit hands toml++ a C string, which ends at the first NUL: the rest of the file would go unread.
        if let nul = text.firstIndex(of: "\0") {
            index = nul
            throw problem("a NUL character (TOML allows none; nothing after it would be read)")
        }
        while let character = current {
            if atLineStart {
                try lineStart(character)
            } else if let expected = expecting {
                expecting = nil
                switch expected {
                case .value: try value(character)
                case .element: try element(character)
                }
            } else {
                other(character)
            }
        }
    }

    /// A header (`[` or `[[`, then a key), or anything else that begins a line.
    private mutating func lineStart(_ character: Unicode.Scalar) throws(Problem) {
        switch character {
        case " ", "\t", "\r", "\n": index += 1
        case "#": skipComment()
        case "[":
            atLineStart = false
            index += 1
            skipSpaces()
            if current == "[" {
                index += 1
                skipSpaces()
            }
            guard let first = current, Self.isKeyStart(first) || first == "]" else {
                throw problem("a table header must start with a key (a letter, a digit, _, - or a quote)")
            }
            skipHeader()
        default:
            atLineStart = false
        }
    }

    /// The first character of a value after `=`.
    private mutating func value(_ character: Unicode.Scalar) throws(Problem) {
        switch character {
        case " ", "\t":
            index += 1
            expecting = .value
        default:
            try valueStart(character)
        }
    }

    /// A value begins at `character` (after `=` or in an array): a string, an array, an inline table or a bare
    /// value. A terminator where the value should be is left for toml++ to report.
    private mutating func valueStart(_ character: Unicode.Scalar) throws(Problem) {
        switch character {
        case "\"", "'": skipString()
        case "[":
            open.append("[")
            index += 1
            expecting = .element
        case "{":
            open.append("{")
            index += 1
        case _ where Self.isValueTerminator(character):
            break
        default:
            try bareValue()
        }
    }

    /// The first character of an array element.
    private mutating func element(_ character: Unicode.Scalar) throws(Problem) {
        switch character {
        case " ", "\t", "\r", "\n":
            index += 1
            expecting = .element
        case "#":
            skipComment()
            expecting = .element
        case "}", "\u{85}", "\u{2028}", "\u{2029}":
            throw problem("expected a value or ] in the array, found \(Self.describe(character))")
        case "]":
            if open.last == "[" { open.removeLast() }
            index += 1
        default:
            try valueStart(character)
        }
    }

    /// Any other character: keys, the rest of a line, what follows a value.
    private mutating func other(_ character: Unicode.Scalar) {
        switch character {
        case "\"", "'":
            skipString()
            return
        case "#":
            skipComment()
            return
        case "=": expecting = .value
        case "[":
            open.append("[")
            expecting = .element
        case "{": open.append("{")
        case "]": if open.last == "[" { open.removeLast() }
        case "}": if open.last == "{" { open.removeLast() }
        case ",": if open.last == "[" { expecting = .element }
        case "\n": atLineStart = open.isEmpty
        default: break
        }
        index += 1
    }

    /// A value that is neither a string, an array nor an inline table, read up to the next terminator as toml++
    /// looks ahead to tell numbers, dates and times apart.
    private mutating func bareValue() throws(Problem) {
        let start = index
        while let character = current, !Self.isValueTerminator(character) { index += 1 }
        let value = Array(text[start..<index])
        // When the ten characters it saw (underscores aside) look like a date and a space and a digit follow, toml++
        // looks ahead again past that digit and asserts that no terminator is there.
        let seen = value.filter { $0 != "_" }
        if seen.count == 10, Self.isDigit(seen[0]), seen[4] == "-", seen[7] == "-", current == " ",
            index + 2 < text.count, Self.isDigit(text[index + 1]), Self.isValueTerminator(text[index + 2])
        {
            index = start
            throw problem("a date followed by a space and a single digit is neither a date nor a date-time")
        }
        // A date, then `T`, then a time: toml++ asserts that the time starts with a digit.
        if value.count > 11, Self.isDate(value[0..<10]), value[10] == "T" || value[10] == "t",
            !Self.isDigit(value[11])
        {
            index = start + 11
            throw problem("expected the time of a date-time (HH:MM:SS), found \(Self.describe(value[11]))")
        }
    }

    /// From the key of a header to its closing `]`, or to the end of the line when there is none.
    private mutating func skipHeader() {
        while let character = current, character != "\n" {
            switch character {
            case "\"", "'": skipString()
            case "]":
                index += 1
                return
            default: index += 1
            }
        }
    }

    /// A basic, literal or multi-line string from its opening quote. A single-line one also ends at a line break,
    /// which toml++ reports.
    private mutating func skipString() {
        let quote = text[index]
        let multiLine = index + 2 < text.count && text[index + 1] == quote && text[index + 2] == quote
        index += multiLine ? 3 : 1
        while let character = current {
            if character == "\\" && quote == "\"" {
                index += 2
            } else if character == quote {
                var run = 0
                while current == quote {
                    run += 1
                    index += 1
                }
                // A multi-line string ends at three quotes; up to two more before them belong to it.
                if !multiLine || run >= 3 { return }
            } else if character == "\n" && !multiLine {
                return
            } else {
                index += 1
            }
        }
    }

    private mutating func skipComment() {
        while let character = current, character != "\n" { index += 1 }
    }

    private mutating func skipSpaces() {
        while current == " " || current == "\t" { index += 1 }
    }

    private func problem(_ message: String) -> Problem {
        let before = text[..<min(index, text.count)]
        // The byte order mark toml++ skipped is no column.
        let lineStart = before.lastIndex(of: "\n").map { $0 + 1 } ?? (text.first == "\u{FEFF}" ? 1 : 0)
        return Problem(line: before.count { $0 == "\n" } + 1, column: index - lineStart + 1, message: message)
    }

    // MARK: Characters, as toml++ classifies them

    private static func isDigit(_ character: Unicode.Scalar) -> Bool { ("0"..."9").contains(character) }

    /// `YYYY-MM-DD`, the numbers unchecked.
    private static func isDate(_ characters: ArraySlice<Unicode.Scalar>) -> Bool {
        characters.count == 10
            && characters.indices.allSatisfy { index in
                let offset = index - characters.startIndex
                return offset == 4 || offset == 7 ? characters[index] == "-" : isDigit(characters[index])
            }
    }

    private static func isKeyStart(_ character: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(character) || ("A"..."Z").contains(character) || isDigit(character)
            || character == "_" || character == "-" || character == "\"" || character == "'"
    }

    /// Whitespace (toml++'s, which includes Unicode spaces and line breaks), `]`, `}`, `,` and `#`.
    private static func isValueTerminator(_ character: Unicode.Scalar) -> Bool {
        switch character.value {
        case 0x09...0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x180E, 0x2000...0x200B, 0x2028, 0x2029, 0x202F, 0x205F, 0x2060,
            0x3000, 0xFEFF:
            true
        default: character == "]" || character == "}" || character == "," || character == "#"
        }
    }

    private static func describe(_ character: Unicode.Scalar) -> String {
        character.isASCII && character.value >= 0x20
            ? "'\(character)'" : "U+\(String(character.value, radix: 16, uppercase: true))"
    }
}
