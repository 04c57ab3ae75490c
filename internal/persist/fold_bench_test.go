package persist

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/informerkit/informerkit/internal/diskcost"
)

// BenchmarkFold is one fold at the size the persistence benchmark runs:
// a snapshot of 10,000 objects of 3.3 KB and a journal as large (7,500
// updates of 4.4 KB): copy the records that are still current from both
// into the new snapshot. cpu-ms/fold is the process's CPU time (user
// and system, the garbage collector's included) per fold.
func BenchmarkFold(b *testing.B) {
	d, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	data := make([]byte, 3300)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	objs := make([]Object, 10000)
	for i := range objs {
		objs[i] = Object{Key: fmt.Sprintf("ns-%d/obj-%d", i%10, i), RV: fmt.Sprint(1000 + i), Data: data}
	}
	w, err := d.Create("cm", testID, State{RV: "20000", Objects: objs})
	if err != nil {
		b.Fatal(err)
	}
	big := make([]byte, 4400)
	copy(big, data)
	rv := 20000
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := 0; j < 7500; j++ {
			rv++
			if err := w.Put(objs[(j*7)%len(objs)].Key, fmt.Sprint(rv), big); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC() // the puts' garbage is not the fold's
		b.StartTimer()
		c0 := diskcost.ProcessCPU()
		if err := w.Fold(); err != nil {
			b.Fatal(err)
		}
		runtime.GC() // the fold's is
		cpu += diskcost.ProcessCPU() - c0
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/fold")
	w.Close()
}
