extension CrashWorkload {
    /// One line of the crash worker's report.
    ///
    /// The worker prints the record of an operation *before* the operation starts, so that the test
    /// knows every operation that may have reached the disk when the worker was killed:
    /// ```
    /// S <key> <seq> <length>   a set of CrashWorkload.value(key:seq:length:) starts
    /// V <key> <seq> <length>   a save (a durable set) of that value starts
    /// W <key> <seq>            the save that started as V <key> <seq> returned
    /// R <key> <seq>            a removal starts
    /// C <seq>                  removeAll() starts (a removal of every key)
    /// M <seq>                  clearMemory() starts (the disk is untouched)
    /// F <seq>                  flush() starts
    /// D <seq>                  the flush that started as F <seq> returned
    /// X <message>              a read disagreed with what the worker set (a failure)
    /// E                        the workload ended without being killed
    /// ```
    package enum Record: Hashable, Sendable {
        /// A set of `CrashWorkload.value(key:seq:length:)` starts.
        case set(key: String, seq: Int, length: Int)
        /// A save (a set that returns once the value is on disk) of that value starts.
        case save(key: String, seq: Int, length: Int)
        /// The save that started as `save(key:seq:length:)` with the same key and `seq` returned.
        case saved(key: String, seq: Int)
        /// A removal of `key` starts.
        case remove(key: String, seq: Int)
        /// `removeAll()` starts: a removal of every key.
        case removeAll(seq: Int)
        /// `clearMemory()` starts; the disk is untouched.
        case clearMemory(seq: Int)
        /// `flush()` starts.
        case flush(seq: Int)
        /// The flush that started as `flush(seq:)` with the same `seq` returned.
        case flushed(seq: Int)
        /// A read disagreed with what the worker had set: a failure, described by the message.
        case mismatch(String)
        /// The workload ended without being killed.
        case end

        /// Reads a record from its line, without the newline; `nil` for a line that is not a record.
        package init?(line: String) {
            let fields = line.split(separator: " ").map(String.init)
            switch (fields.first, fields.count) {
            case ("S", 4), ("V", 4):
                guard let seq = Int(fields[2]), let length = Int(fields[3]) else { return nil }
                self =
                    fields[0] == "S"
                    ? .set(key: fields[1], seq: seq, length: length) : .save(key: fields[1], seq: seq, length: length)
            case ("W", 3):
                guard let seq = Int(fields[2]) else { return nil }
                self = .saved(key: fields[1], seq: seq)
            case ("R", 3):
                guard let seq = Int(fields[2]) else { return nil }
                self = .remove(key: fields[1], seq: seq)
            case ("C", 2), ("M", 2), ("F", 2), ("D", 2):
                guard let seq = Int(fields[1]) else { return nil }
                switch fields[0] {
                case "C": self = .removeAll(seq: seq)
                case "M": self = .clearMemory(seq: seq)
                case "F": self = .flush(seq: seq)
                default: self = .flushed(seq: seq)
                }
            case ("E", 1):
                self = .end
            default:
                guard line.hasPrefix("X ") else { return nil }
                self = .mismatch(String(line.dropFirst(2)))
            }
        }

        /// The line that reports the record, without the newline.
        ///
        /// Keys must not contain spaces: the line would not read back as the same record.
        package var line: String {
            switch self {
            case .set(let key, let seq, let length): "S \(key) \(seq) \(length)"
            case .save(let key, let seq, let length): "V \(key) \(seq) \(length)"
            case .saved(let key, let seq): "W \(key) \(seq)"
            case .remove(let key, let seq): "R \(key) \(seq)"
            case .removeAll(let seq): "C \(seq)"
            case .clearMemory(let seq): "M \(seq)"
            case .flush(let seq): "F \(seq)"
            case .flushed(let seq): "D \(seq)"
            case .mismatch(let message): "X \(message)"
            case .end: "E"
            }
        }

        /// Whether the record announces an operation that starts (a set, a removal, a clear or a
        /// flush): what a test counts to kill the worker after a given number of operations.
        package var startsAnOperation: Bool {
            switch self {
            case .set, .save, .remove, .removeAll, .clearMemory, .flush: true
            case .flushed, .saved, .mismatch, .end: false
            }
        }
    }
}
