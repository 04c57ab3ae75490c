package gate

import "testing"

// TestWatchPathOf is the gate's answer to every watch request: plain or
// watch-list, gate open or closed, in every phase.
func TestWatchPathOf(t *testing.T) {
	type key struct {
		watchList, open bool
		phase           Phase
	}
	want := map[key]watchPath{
		{false, true, Pending}:   watchServer, // the reflector lists first; not reached
		{false, true, Serving}:   watchServer,
		{false, true, Relisting}: relistExpired,
		{false, true, Emptied}:   awaitReturn, // refill inside the stream

		{false, false, Pending}:   awaitReturn, // then "expired": never listed
		{false, false, Serving}:   removeCached,
		{false, false, Relisting}: removeCached,
		{false, false, Emptied}:   awaitReturn,

		{true, true, Pending}:   streamServer, // the first sync streams
		{true, true, Serving}:   streamServer,
		{true, true, Relisting}: relistFallback,
		{true, true, Emptied}:   notServedFallback,

		{true, false, Pending}:   notServedFallback, // closed again after the wait
		{true, false, Serving}:   notServedFallback, // the list answers empty
		{true, false, Relisting}: notServedFallback,
		{true, false, Emptied}:   notServedFallback,
	}
	for k, w := range want {
		if got := watchPathOf(k.watchList, k.open, k.phase); got != w {
			t.Errorf("watchPathOf(watchList %v, open %v, %v) = %v, want %v", k.watchList, k.open, k.phase, got, w)
		}
	}
	if len(want) != 16 {
		t.Fatalf("table has %d rows, want every one of the 16 cases", len(want))
	}
}
