package dynamicinformer

import (
	"testing"

	"github.com/informerkit/informerkit/dynamicinformer/internal/lifecycle"
)

// The public states and reasons are the state machine's.
func TestStatesAreTheMachines(t *testing.T) {
	public := []State{Pending, Syncing, Synced, Removed, Failed, Stopped}
	if len(public) != len(lifecycle.States) {
		t.Fatalf("%d public states, the machine has %d", len(public), len(lifecycle.States))
	}
	for i, s := range public {
		if string(s) != string(lifecycle.States[i]) {
			t.Errorf("state %q, the machine's %q", s, lifecycle.States[i])
		}
	}
	if WaitingForSlotReason != lifecycle.WaitingForSlotReason {
		t.Errorf("WaitingForSlotReason %q, the machine's %q", WaitingForSlotReason, lifecycle.WaitingForSlotReason)
	}
}
