// The consistency checks of W-TinyLFU's state besides the links, for tests and debugging; nothing in
// the library calls them.

extension AdmissionState {
    /// Checks the targets, the sketch's period and the experts; traps on the first inconsistency.
    ///
    /// - Complexity: O(the experts' entries).
    func checkInvariants() {
        precondition(windowSize >= 1 && windowSize <= Double(capacity), "window size out of 1 ... capacity")
        let (window, protected) = Self.targets(windowSize: windowSize, capacity: capacity)
        precondition(windowTarget == window && protectedTarget == protected, "region targets")
        precondition(
            sketch.resetPeriod == Self.resetPeriod(windowTarget: windowTarget, capacity: capacity),
            "the sketch's period follows the window"
        )
        precondition(sketch.additions <= sketch.resetPeriod, "sketch additions past the period")
        precondition(sketch.table.isEmpty || sketch.table.count >= Self.minimumSketchWords, "sketch floor")
        experts.checkInvariants()
    }
}

extension WindowExperts {
    /// Checks every expert and the climber's counts; traps on the first inconsistency.
    func checkInvariants() {
        guard isActive else {
            precondition(experts.isEmpty, "an inactive climber's experts")
            return
        }
        precondition(experts.count == Self.expertCount, "five experts")
        for (index, expert) in experts.enumerated() {
            let configuration = Self.configurations[index]
            precondition(expert.admitsAll == configuration.admitsAll, "expert admission mode")
            precondition(expert.capacity == experts[0].capacity, "experts of one size")
            expert.checkInvariants()
        }
        precondition(periodRequests < Self.period, "a period past its end")
        for index in scores.indices { precondition(scores[index] >= 0, "negative score") }
        for index in disagreements.indices {
            precondition(abs(disagreements[index]) <= disagreementCounts[index] + 1e-9, "|D| > N")
        }
    }
}

extension SimulatedPolicy {
    /// Checks the regions, their sizes, the table and the free nodes; traps on the first
    /// inconsistency.
    ///
    /// - Complexity: O(capacity).
    func checkInvariants() {
        var seen = 0
        for region in [Self.window, Self.probation, Self.protected] {
            var node = regions[Int(region)].head
            var previous = Self.none
            var size = 0
            while node != Self.none {
                precondition(flags[Int(node)] & 3 == region, "expert node region")
                precondition(nodes[Int(node)].prev == previous, "expert node links")
                precondition(find(nodes[Int(node)].hash) == node, "expert table")
                precondition(
                    region != Self.window || flags[Int(node)] & Self.incumbent == 0,
                    "an incumbent in an expert's window"
                )
                size += 1
                previous = node
                node = nodes[Int(node)].next
            }
            precondition(regions[Int(region)].tail == previous, "expert region tail")
            precondition(regions[Int(region)].count == size, "expert region size")
            seen += size
        }
        precondition(seen == count && count <= capacity, "expert count")
        precondition(cells.filter { $0 != 0 }.count == count, "expert table count")
        precondition(regions[Int(Self.protected)].count <= protectedTarget, "expert protected size")
        var free = 0
        var node = freeList
        while node != Self.none {
            precondition(flags[Int(node)] == 0, "a free expert node in a region")
            free += 1
            node = nodes[Int(node)].next
        }
        precondition(count + free == unused, "expert nodes lost")
    }
}
