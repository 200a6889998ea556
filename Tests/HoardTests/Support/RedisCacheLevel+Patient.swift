import Foundation
import HoardRedis

extension RedisCacheLevel {
    /// A level at `url` whose connections and commands wait 10 s, not the default second: in a loaded
    /// test run (sanitizers, every suite at once on two cores) an answer can take longer than a
    /// second, and a test that is not about timeouts must not fail on one.
    static func patient(
        url: String,
        namespace: String,
        poolSize: Int = 4,
        defaultTTL: Duration? = nil
    ) throws -> RedisCacheLevel {
        try RedisCacheLevel(
            url: url,
            namespace: namespace,
            poolSize: poolSize,
            connectTimeout: .seconds(10),
            commandTimeout: .seconds(10),
            defaultTTL: defaultTTL
        )
    }
}
