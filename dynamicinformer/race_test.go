//go:build race

package dynamicinformer

// raceFactor scales memory bounds under the race detector, whose
// instrumentation allocates more per object.
const raceFactor = 1.6
