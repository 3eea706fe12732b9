package passes

import "github.com/tsplit/tsplit/memory"

// Liveness is the memory model of the current order: every tensor's
// lifetime and M_i, the bytes live at each op (package memory, the same
// model the runtime replays).
var Liveness = &Pass{
	Name: "liveness",
	Doc:  "lifetime of every value and M_i, the bytes live at each op",
	Run: func(s *State) (any, error) {
		return memory.Analyze(s.Model.Graph, memory.Options{})
	},
}
