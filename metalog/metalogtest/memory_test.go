package metalogtest

import "testing"

func TestMemoryConformance(t *testing.T) {
	Run(t, Backend{New: func(*testing.T) Store { return &Memory{} }, Fences: true})
}
