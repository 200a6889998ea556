import Foundation
import Hoard

let clock = ContinuousClock()

func section(_ number: Int, _ title: String) {
    print("\n━━ \(number). \(title) " + String(repeating: "━", count: max(3, 66 - title.count)))
}

func explain(_ text: String) {
    print("   " + text)
}

func padded(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

/// A folder for the demo's containers that survives between runs.
let demoDirectory = CacheBuilder<Article>.defaultDirectory
