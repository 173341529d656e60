import SleepProxyControl

/// A plain-text table: a header row and rows of cells, each column padded to its widest cell, two spaces apart.
///
/// Widths only grow, so a table can also be printed a row at a time (a `follow` stream): `fit(_:)` a new row,
/// then print `line(_:colour:)`. The last column is never padded, so lines carry no trailing spaces.
struct TextTable: Sendable {
    /// How a cell is drawn on a terminal that takes colour.
    struct Style: Hashable, Sendable {
        private enum Base: Hashable, Sendable {
            case plain
            case bold
            case dim
            case green
            case yellow
            case red
        }

        private let base: Base

        static let plain = Style(base: .plain)
        static let bold = Style(base: .bold)
        static let dim = Style(base: .dim)
        /// Good: a held host, a registration.
        static let green = Style(base: .green)
        /// Changing: a host being taken over or woken.
        static let yellow = Style(base: .yellow)
        /// Wrong: a refusal, a conflict, an expired lease, dropped frames.
        static let red = Style(base: .red)

        /// The ANSI escape that starts this style, empty for `plain`.
        var escape: String {
            switch base {
            case .plain: ""
            case .bold: "\u{1B}[1m"
            case .dim: "\u{1B}[2m"
            case .green: "\u{1B}[32m"
            case .yellow: "\u{1B}[33m"
            case .red: "\u{1B}[31m"
            }
        }

        /// `text` in this style when `colour` is on, else `text` itself.
        func apply(_ text: String, colour: Bool) -> String {
            guard colour, self != .plain, !text.isEmpty else { return text }
            return escape + text + "\u{1B}[0m"
        }
    }

    /// One cell: its text and how to draw it.
    struct Cell: Hashable, Sendable, ExpressibleByStringLiteral {
        var text: String
        var style: Style

        init(_ text: String, _ style: Style = .plain) {
            self.text = text
            self.style = style
        }

        init(stringLiteral value: String) {
            self.init(value)
        }
    }

    private(set) var headers: [String]
    private(set) var rows: [[Cell]] = []
    /// The width of each column so far: its widest cell, header included.
    private(set) var widths: [Int]
    /// Put in front of every line.
    var indent: String

    /// An empty table with these column headers. `minimumWidths` keeps columns from starting narrower.
    init(headers: [String], minimumWidths: [Int] = [], indent: String = "") {
        self.headers = headers
        self.indent = indent
        self.widths = headers.enumerated().map { index, header in
            max(header.count, index < minimumWidths.count ? minimumWidths[index] : 0)
        }
    }

    /// Adds a row at the end, widening columns as needed.
    mutating func append(_ row: [Cell]) {
        fit(row)
        rows.append(row)
    }

    /// Widens columns so that `row` fits, without keeping it.
    mutating func fit(_ row: [Cell]) {
        for (index, cell) in row.enumerated() where index < widths.count {
            widths[index] = max(widths[index], cell.text.count)
        }
    }

    /// The header row, bold when `colour` is on.
    func headerLine(colour: Bool) -> String {
        line(headers.map { Cell($0, .bold) }, colour: colour)
    }

    /// One row drawn with the current widths. A cell wider than its column pushes the rest of the line right.
    func line(_ row: [Cell], colour: Bool) -> String {
        var text = indent
        let lastIndex = row.lastIndex { !$0.text.isEmpty } ?? -1
        for (index, cell) in row.enumerated() where index <= lastIndex {
            text += cell.style.apply(cell.text, colour: colour)
            if index < lastIndex {
                let width = index < widths.count ? widths[index] : cell.text.count
                text += String(repeating: " ", count: max(0, width - cell.text.count) + 2)
            }
        }
        return text
    }

    /// The header and every row, one line each, each ending in a newline.
    func render(colour: Bool) -> String {
        var text = headerLine(colour: colour) + "\n"
        for row in rows {
            text += line(row, colour: colour) + "\n"
        }
        return text
    }
}
