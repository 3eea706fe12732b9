package memory

// GreedyBySize exposes the greedy-by-size placement to the tests, which
// compare it with a plain statement of the same rule.
func (m *Model) GreedyBySize() ([]int64, int64) { return m.greedyBySize() }
