import Foundation

/// Prints a numbered heading, padded to one width.
func section(_ number: Int, _ title: String) {
    print("\n━━ \(number). \(title) " + String(repeating: "━", count: max(3, 66 - title.count)))
}

/// Prints a line of narration, indented under its heading.
func explain(_ text: String) {
    print("   " + text)
}

/// `text` followed by spaces up to `width` characters.
func padded(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

/// A path as a reader would type it, with the home folder as `~`.
func displayPath(_ url: URL) -> String {
    let path = url.standardizedFileURL.path
    // `HOME` first: it is what the caches folder was found from.
    let homePath = ProcessInfo.processInfo.environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path
    let home = URL(fileURLWithPath: homePath).standardizedFileURL.path
    guard !home.isEmpty, home != "/", path == home || path.hasPrefix(home + "/") else { return path }
    return "~" + path.dropFirst(home.count)
}
