package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
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
func runRestart(ctx context.Context, rc *rest.Config, stop func(), sizes []int, runs, events int, persistOnly, persistCompact bool, persistProfile, out string) int {
	start := time.Now()
	restart, persist, err := bench.RunRestart(ctx, rc, bench.RestartConfig{
		Sizes: sizes, Runs: runs, PersistEvents: events, Compact: compactEtcd, SkipRestart: persistOnly,
		PersistCPUProfile: persistProfile, PersistCompact: persistCompact,
		Writer: persistWriter(rc),
		Logf:   func(f string, a ...any) { log.Printf(f, a...) },
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

// persistArgs is what a -persist-write child is told.
type persistArgs struct {
	Host, Token string
	Tag         string
	M, N        int
	Rate        float64
}

// persistWriter runs the persistence measurement's writes in a child
// process of this binary, so that the measuring process's CPU is the
// informer's alone.
func persistWriter(rc *rest.Config) func(ctx context.Context, tag string, m, n int, rate float64) error {
	return func(ctx context.Context, tag string, m, n int, rate float64) error {
		arg, err := json.Marshal(persistArgs{Host: rc.Host, Token: rc.BearerToken, Tag: tag, M: m, N: n, Rate: rate})
		if err != nil {
			return err
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, self, "-persist-write", string(arg))
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("writer process: %w", err)
		}
		return nil
	}
}

func persistWriteChild(arg string) {
	var a persistArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		log.Fatal(err)
	}
	rc := &rest.Config{Host: a.Host, BearerToken: a.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 1000, Burst: 2000}
	if err := bench.PersistWrite(context.Background(), rc, a.Tag, a.M, a.N, a.Rate); err != nil {
		log.Fatal(err)
	}
}
