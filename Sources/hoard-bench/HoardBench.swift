import Foundation

/// The benchmark's entry point: `swift run -c release hoard-bench [scenario …] [--quick]`.
///
/// Runs the named scenarios (all of them when none is named), prints a table per scenario and, at
/// the end, a summary block that can be pasted into the Performance article.
@main
struct HoardBench {
    static func main() async throws {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == MemoryPerEntry.childArgument {
            exit(MemoryPerEntry.runChild(Array(arguments.dropFirst())))
        }
        if arguments.first == MemoryGetProbe.childArgument {
            exit(MemoryGetProbe.runChild(Array(arguments.dropFirst())))
        }
        if arguments.first == DiskOpen.childArgument {
            exit(DiskOpen.runChild(Array(arguments.dropFirst())))
        }
        var quick = false
        var names: [String] = []
        var tracesDirectory: String?
        var traceSizes: [Int]?
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            switch argument {
            case "--quick": quick = true
            case "--traces":
                guard let directory = remaining.popFirst() else {
                    progress("hoard-bench: --traces needs a folder.\n\n" + usage)
                    exit(2)
                }
                tracesDirectory = directory
            case "--sizes":
                guard let list = remaining.popFirst(),
                    case let sizes = list.split(separator: ",").compactMap({ Int($0) }),
                    !sizes.isEmpty, sizes.allSatisfy({ $0 > 0 })
                else {
                    progress(
                        "hoard-bench: --sizes needs positive sizes separated by commas, as in 250,1000.\n\n" + usage
                    )
                    exit(2)
                }
                traceSizes = sizes
            case "--help", "-h":
                print(usage)
                return
            default:
                guard ScenarioRegistry.named(argument) != nil else {
                    progress("hoard-bench: unknown scenario \"\(argument)\".\n\n" + usage)
                    exit(2)
                }
                if !names.contains(argument) { names.append(argument) }
            }
        }
        let scenarios = names.isEmpty ? ScenarioRegistry.all : names.compactMap(ScenarioRegistry.named)
        if tracesDirectory != nil && names.isEmpty { names = ["hitrate"] }
        let context = BenchContext(quick: quick, tracesDirectory: tracesDirectory, traceSizes: traceSizes)

        #if DEBUG
        print("warning: this is a debug build; measure with `swift run -c release hoard-bench`.\n")
        #endif
        let plan = context.plan
        print(
            "hoard-bench\(quick ? " --quick (sizes ÷ 10)" : ""): \(plan.warmups) warm-up + \(plan.runs) measured runs per row, "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores; rates are operations per second "
                + "(median, min – max over the measured runs)\n"
        )

        let started = ContinuousClock.now
        var summary: [String] = []
        var targets: [TargetCheck] = []
        for scenario in scenarios {
            progress("\(scenario.name):")
            let report = try await scenario.run(context)
            print(report.rendered())
            print()
            summary += report.summaryLines()
            targets += report.targets
        }

        print("== summary\(quick ? " (--quick)" : "") ==")
        for line in summary { print(line) }
        if !targets.isEmpty {
            print()
            print("== targets\(quick ? " (--quick: sizes ÷ 10, indicative only)" : "") ==")
            for target in targets { print(target.rendered) }
            let judged = targets.filter(\.isJudged)
            let missed = judged.filter { !$0.holds }.count
            let unjudged = targets.count - judged.count
            print(
                "\(judged.count - missed) of \(judged.count) targets hold"
                    + (unjudged == 0 ? "" : "; \(unjudged) not judged: this host could not reach what they need")
            )
        }
        progress(String(format: "hoard-bench: %.1f s in all", started.duration(to: .now).seconds))
    }

    static var usage: String {
        var lines = [
            "usage: swift run -c release hoard-bench [scenario …] [--quick] [--traces DIR [--sizes a,b,c]]",
            "",
            "  --quick         sizes divided by 10, 1 warm-up + 2 measured runs",
            "  --traces DIR    hitrate replays the real traces in DIR (*.txt.gz or *.txt, one id per line)",
            "                  at the sizes DIR/anchors.json lists, beside its classic policies' hit rates",
            "  --sizes a,b,c   with --traces: these cache sizes instead",
            "",
            "scenarios (all when none is named):",
        ]
        let width = ScenarioRegistry.all.map(\.name.count).max() ?? 0
        for scenario in ScenarioRegistry.all {
            lines.append("  \(scenario.name.padding(toLength: width, withPad: " ", startingAt: 0))   \(scenario.help)")
        }
        return lines.joined(separator: "\n")
    }
}
