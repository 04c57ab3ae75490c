package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"runtime"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/test/bench"
)

// etcdEndpoints is the child control plane's etcd (serverInfo.Etcd).
var etcdEndpoints string

// compactEtcd compacts the child's etcd up to its current revision (as
// controlplane.ControlPlane.Compact does), so that a watch from an older
// resourceVersion answers 410.
func compactEtcd(ctx context.Context) error {
	if etcdEndpoints == "" {
		return fmt.Errorf("the control plane did not say where its etcd is")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(etcdEndpoints, ","), DialTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.Put(ctx, "/ikbench-compaction-marker", time.Now().String())
	if err != nil {
		return err
	}
	_, err = c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	return err
}

// runRestart is ikbench -restart: the restart-from-disk scenario alone.
func runRestart(ctx context.Context, rc *rest.Config, stop func(), sizes []int, runs, events int, out string) int {
	start := time.Now()
	restart, persist, err := bench.RunRestart(ctx, rc, bench.RestartConfig{
		Sizes: sizes, Runs: runs, PersistEvents: events, Compact: compactEtcd,
		Logf: func(f string, a ...any) { log.Printf(f, a...) },
	})
	stop()
	if err != nil {
		log.Printf("run failed: %v", err)
	}
	if restart == nil {
		return 1
	}
	table := fmt.Sprintf("ikbench -restart %s: GOMAXPROCS=%d, sizes=%v, runs=%d, persistence %d events; took %v\n\n%s\n%s",
		time.Now().Format("2006-01-02"), runtime.GOMAXPROCS(0), sizes, runs, events,
		time.Since(start).Round(time.Second), restart.Markdown(), persist.Markdown())
	fmt.Println(table)
	if out != "" {
		if werr := os.WriteFile(out, []byte(table), 0o644); werr != nil {
			log.Print(werr)
		}
	}
	if err != nil {
		return 1
	}
	return 0
}
