package check

import (
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// Porcupine's HTML visualisation of a failing partition.

// visual is the reported window, for the visualization.
func (m *minimal) visual() []porcupine.Operation {
	return porcOps(m.window, m.cut)
}

func visualize(h *history.History, ops []porcupine.Operation, path string) error {
	_, info := porcupine.CheckOperationsVerbose(linModel, ops, 30*time.Second)
	var ann []porcupine.Annotation
	for _, n := range h.Nemeses {
		ann = append(ann, porcupine.Annotation{Tag: "nemesis", Start: int64(n.Start), End: int64(n.End),
			Description: n.Kind, Details: n.Detail, BackgroundColor: "#f7d7d7"})
	}
	if len(ann) > 0 {
		info.AddAnnotations(ann)
	}
	return porcupine.VisualizePath(linModel, info, path)
}
