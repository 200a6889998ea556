// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Hoard",
    platforms: [
        .macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1),
    ],
    products: [
        .library(name: "Hoard", targets: ["Hoard"]),
        .executable(name: "hoard-demo", targets: ["hoard-demo"]),
        .executable(name: "hoard-bench", targets: ["hoard-bench"]),
    ],
    targets: [
        .target(name: "Hoard"),
        .executableTarget(name: "hoard-demo", dependencies: ["Hoard"]),
        .executableTarget(name: "hoard-bench", dependencies: ["Hoard"]),
        // A child process for the crash, two-process and file-system fault tests (Tests/HoardTests/Trust).
        .executableTarget(name: "hoard-test-worker", dependencies: ["Hoard"]),
        .testTarget(name: "HoardTests", dependencies: ["Hoard"]),
    ],
    swiftLanguageModes: [.v6]
)
