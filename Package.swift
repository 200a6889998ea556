// swift-tools-version: 6.2
// Hoard: a thread-safe memory and disk object cache for Swift. MIT License (see LICENSE).
import PackageDescription

let package = Package(
    name: "Hoard",
    platforms: [
        .macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1),
    ],
    products: [
        .library(name: "Hoard", targets: ["Hoard"]),
        // The shared level for fleets (RedisCacheLevel): a product of its own, so that apps that do not
        // use it neither compile nor link a network client.
        .library(name: "HoardRedis", targets: ["HoardRedis"]),
        .executable(name: "hoard-demo", targets: ["hoard-demo"]),
        .executable(name: "hoard-bench", targets: ["hoard-bench"]),
    ],
    // `rediss://` on Linux: the TLS trait links the system's OpenSSL (`libssl-dev` on Debian and
    // Ubuntu), so that a build without it needs nothing beyond the toolchain. Apple platforms use
    // their own TLS (Network.framework) with or without the trait.
    traits: [
        .trait(name: "TLS", description: "rediss:// on Linux, through the system's OpenSSL (libssl).")
    ],
    targets: [
        .target(name: "Hoard", dependencies: ["CHoardChecksum"]),
        // CRC-32 with carry-less multiplication (PCLMULQDQ) and SHA-256 with the SHA extensions,
        // which Swift cannot reach: compiled on x86_64 only, and used there when the CPU has them.
        // Everywhere else Hoard's Swift slicing-by-16 and SHA-256 do the work alone.
        .target(name: "CHoardChecksum"),
        // A C target rather than a system library: SwiftPM 6.3's `diagnose-api-breaking-changes`
        // crashes while planning a system library's pkg-config. Its header is empty without
        // OpenSSL's headers, and it links libssl only with the trait.
        .target(
            name: "COpenSSL",
            linkerSettings: [
                .linkedLibrary("ssl", .when(platforms: [.linux], traits: ["TLS"])),
                .linkedLibrary("crypto", .when(platforms: [.linux], traits: ["TLS"])),
            ]
        ),
        .target(
            name: "HoardRedis",
            dependencies: [
                "Hoard",
                .target(name: "COpenSSL", condition: .when(platforms: [.linux], traits: ["TLS"])),
            ]
        ),
        // What the tests, the benchmark and the test worker share: seeded random numbers, the Zipf
        // sampler, thread helpers and the crash workload's format. In no product, and its API is
        // `package`, so it never ships with Hoard.
        .target(name: "HoardTestSupport", dependencies: ["Hoard"]),
        .executableTarget(name: "hoard-demo", dependencies: ["Hoard"]),
        .executableTarget(name: "hoard-bench", dependencies: ["Hoard", "HoardRedis", "HoardTestSupport"]),
        // A child process for the crash, two-process and file-system fault tests (Tests/HoardTests/Trust).
        .executableTarget(name: "hoard-test-worker", dependencies: ["Hoard", "HoardRedis", "HoardTestSupport"]),
        .testTarget(name: "HoardTests", dependencies: ["Hoard", "HoardRedis", "HoardTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
