import Foundation
import HoardTestSupport

@testable import Hoard

/// Collects every message Hoard logs during the test run.
///
/// Tests run in parallel and the logger is global, so it is installed once and never removed;
/// a test finds its own messages by something unique to it, such as its temporary folder's path.
enum TestLog {
    private static let messages = Protected<[(message: String, level: HoardLogger.Level)]>([])
    private static let installation: Void = {
        HoardLogger.output = { message, level in messages.withLock { $0.append((message, level)) } }
    }()

    /// Starts collecting (idempotent).
    static func install() { _ = installation }

    /// The messages that contain `text`.
    static func messages(containing text: String) -> [(message: String, level: HoardLogger.Level)] {
        messages.withLock { $0.filter { $0.message.contains(text) } }
    }
}
