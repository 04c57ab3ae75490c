package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/informerkit/informerkit/subscription"
)

// -o table and -o wide print what `kubectl get -w --output-watch-events`
// prints: the server's own columns for each resource (a CRD's
// additionalPrinterColumns, a built-in kind's server-side printer columns),
// an EVENT column in front, NAMESPACE when the resource is namespaced and
// more than one namespace is watched, and kind/name in the NAME column when
// more than one resource is watched. The informers still deliver the
// events; the rows come from the server's Table responses:
//
//   - One goroutine per resource, running only while that resource has
//     events waiting, fetches the rows of every object that waits: one
//     paged Table LIST of the resource when that takes fewer requests than
//     a GET per object (an initial list, a burst), else a Table GET per
//     object. At most tableConcurrency requests run at once over all
//     resources, under a rate limit of their own.
//   - Events that arrive while rows are being fetched wait in a queue keyed
//     by object: several events of one object that wait together print one
//     row (its latest state, under the latest event type — ADDED if the
//     object was added meanwhile), and one more if it was deleted. Events are
//     coalesced only when the server cannot keep up — except an initial
//     list, whose first event waits tableInitialWindow for the rest so that
//     the list is one LIST and one aligned block, as kubectl prints it.
//   - Like kubectl get -w, a column widens when a longer value comes;
//     lines already printed keep their widths.
//   - A DELETED prints the last row printed (or listed) for the object; the
//     server cannot convert an object that is gone.
//   - Rows the server cannot give (the object is gone, the request failed)
//     are built from the informer's object: its name, its age and empty
//     cells. A resource whose server refuses Table gets NAME and AGE columns
//     from then on, with a one-time warning on stderr.
//
// Rows of one resource print in the order their events arrived; rows of
// different resources interleave.

// tableAccept asks for a Table and accepts the plain object from a server
// that cannot convert (kubectl sends the same, plus meta.k8s.io/v1beta1).
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

const (
	// tableConcurrency bounds the Table requests in flight over all resources.
	tableConcurrency = 4
	// tableListPage is the page size of Table LISTs.
	tableListPage = 500
	// tableInitialWindow is how long the first event of an initial list
	// waits for the rest of it, so that the list is fetched by one LIST
	// and printed as one aligned block, as kubectl prints it.
	tableInitialWindow = 100 * time.Millisecond
	// tableStopGrace is how long stop waits for rows still being fetched
	// before it prints the rest from what it knows.
	tableStopGrace = 3 * time.Second
)

// tableOutput turns informer events into table rows. event never blocks on
// the network; stop prints what is still waiting and ends every goroutine.
type tableOutput struct {
	client   tableClient
	out      *printer
	wide     bool
	withKind bool // more than one resource is watched: NAME is kind/name
	timeout  time.Duration
	kindOf   func(schema.GroupVersionResource) schema.GroupKind // for resources whose objects carry no kind
	now      func() time.Time
	// cluster, watching several contexts, is the context whose rows this
	// table prints: a CLUSTER column comes first ("": none).
	cluster string

	sem chan struct{} // tableConcurrency slots for requests

	ctx    context.Context // ends when stop gives up waiting
	cancel context.CancelFunc
	wg     sync.WaitGroup // running drain goroutines

	mu      sync.Mutex // guards streams, closed, and every stream's pending, order, running and rows
	streams map[streamKey]*tableStream
	closed  bool
}

// streamKey identifies one informer's events: a resource seen through its
// namespaces and selectors.
type streamKey struct {
	gvr          schema.GroupVersionResource
	namespaces   string // comma-joined; "" for all
	label, field string
}

// tableStream is the table of one resource (as one informer sees it).
type tableStream struct {
	key        streamKey
	namespaces []string

	// Under tableOutput.mu:
	pending map[string]*pendingRow // object key → what waits for a row
	order   []string               // pending keys, in the order they first arrived
	running bool                   // a drain goroutine owns the stream
	rows    map[string]cachedRow   // last row known per object key

	// Owned by the drain goroutine (one at a time, handed over under
	// tableOutput.mu):
	columns  []metav1.TableColumnDefinition // last columns the server sent
	fallback bool                           // the server refused Table: NAME and AGE
	warned   bool                           // a failed request has been reported
	printer  printers.ResourcePrinter
	buf      bytes.Buffer
	tw       interface {
		io.Writer
		Flush() error
	} // kubectl's tabwriter: widths remembered across flushes
	setupDone bool
}

// pendingRow is what one object waits to print.
type pendingRow struct {
	typ     watch.EventType
	obj     *unstructured.Unstructured // the informer's latest object
	initial bool                       // every merged event came from the informer's initial list
	deleted bool                       // a DELETED followed an ADDED or MODIFIED: both print
}

// cachedRow is a row the server gave, with the columns it came under.
type cachedRow struct {
	columns []metav1.TableColumnDefinition
	row     metav1.TableRow
	listed  bool // from a LIST (not printed yet): good for an initial ADDED only
}

func newTableOutput(client tableClient, out *printer, wide, withKind bool, timeout time.Duration, kindOf func(schema.GroupVersionResource) schema.GroupKind) *tableOutput {
	ctx, cancel := context.WithCancel(context.Background())
	return &tableOutput{
		client: client, out: out, wide: wide, withKind: withKind, timeout: timeout, kindOf: kindOf, now: time.Now,
		sem: make(chan struct{}, tableConcurrency), ctx: ctx, cancel: cancel,
		streams: map[streamKey]*tableStream{},
	}
}

func objectKey(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// eventType maps the informer's event types to the watch event types that
// kubectl prints (UPDATED is MODIFIED there).
func eventType(t subscription.EventType) watch.EventType {
	switch t {
	case subscription.Added:
		return watch.Added
	case subscription.Deleted:
		return watch.Deleted
	}
	return watch.Modified
}

// event queues a row for ev, seen by an informer with these namespaces and
// selectors. It returns at once; the row prints when it has been fetched.
func (t *tableOutput) event(ev subscription.Event, u *unstructured.Unstructured, namespaces []string, label, field string) {
	k := streamKey{gvr: ev.GVR, namespaces: strings.Join(namespaces, ","), label: label, field: field}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	s := t.streams[k]
	if s == nil {
		s = &tableStream{key: k, namespaces: namespaces, pending: map[string]*pendingRow{}, rows: map[string]cachedRow{}}
		t.streams[k] = s
	}
	key := objectKey(u)
	typ := eventType(ev.Type)
	if p := s.pending[key]; p != nil {
		switch {
		case typ == watch.Deleted && p.typ != watch.Deleted:
			p.deleted = true // its row prints, then the DELETED
		case typ == watch.Deleted:
		case p.deleted || p.typ == watch.Deleted:
			*p = pendingRow{typ: watch.Added} // deleted and created again: the new object
		case !(p.typ == watch.Added && typ == watch.Modified):
			p.typ = typ
		}
		p.obj = u
		p.initial = p.initial && ev.IsInitialList
	} else {
		s.pending[key] = &pendingRow{typ: typ, obj: u, initial: ev.IsInitialList}
		s.order = append(s.order, key)
	}
	if !s.running {
		s.running = true
		t.wg.Add(1)
		go t.drain(s)
	}
}

// stop waits up to tableStopGrace for rows being fetched, then prints the
// rest from what it knows, and returns when every goroutine has ended.
// Events after stop are dropped.
func (t *tableOutput) stop() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(tableStopGrace):
		t.cancel()
		<-done
	}
	t.cancel()
}

// drain prints the stream's waiting rows until none wait.
func (t *tableOutput) drain(s *tableStream) {
	defer t.wg.Done()
	t.mu.Lock()
	initial := len(s.order) > 0 && s.pending[s.order[0]].initial
	t.mu.Unlock()
	if initial {
		select {
		case <-time.After(tableInitialWindow):
		case <-t.ctx.Done():
		}
	}
	for {
		t.mu.Lock()
		if len(s.order) == 0 {
			s.running = false
			t.mu.Unlock()
			return
		}
		batch := make([]string, len(s.order))
		copy(batch, s.order)
		rows := make([]pendingRow, len(batch))
		for i, key := range batch {
			rows[i] = *s.pending[key]
		}
		s.order = s.order[:0]
		clear(s.pending)
		known := len(s.rows)
		t.mu.Unlock()
		t.printBatch(s, batch, rows, known)
	}
}

// printBatch fetches the rows of one batch and prints them.
func (t *tableOutput) printBatch(s *tableStream, keys []string, pend []pendingRow, known int) {
	if !s.setupDone {
		t.setupStream(s, pend[0].obj)
	}
	fresh := map[string]cachedRow{} // rows fetched for this batch
	if !s.fallback {
		var need []int // indexes of the objects whose row must come from the server
		t.mu.Lock()
		for i, key := range keys {
			if pend[i].typ == watch.Deleted || pend[i].deleted {
				continue // gone: the server has no row for it
			}
			if c, ok := s.rows[key]; ok && c.listed && pend[i].initial {
				fresh[key] = c // listed after the informer's list began: as new as its object
				continue
			}
			need = append(need, i)
		}
		t.mu.Unlock()
		// A LIST when it takes fewer requests than a GET per object.
		if pages := known/tableListPage + 1; len(need) > 1 && pages < len(need) {
			listed, err := t.list(s)
			if err == nil {
				t.mu.Lock()
				for key, c := range listed {
					s.rows[key] = c
				}
				t.mu.Unlock()
				for _, i := range need {
					if c, ok := listed[keys[i]]; ok {
						fresh[keys[i]] = c
					}
				}
				need = need[:0] // what the LIST lacks is gone or no longer matches
			} else {
				t.requestFailed(s, err)
			}
		}
		for _, i := range need {
			if s.fallback || t.ctx.Err() != nil {
				break
			}
			c, err := t.get(s, pend[i].obj)
			if err != nil {
				if !apierrors.IsNotFound(err) {
					t.requestFailed(s, err)
				}
				continue
			}
			fresh[keys[i]] = c
		}
	}
	var run *rowRun // consecutive rows of one event type and one column set
	for i, key := range keys {
		p := pend[i]
		t.mu.Lock()
		c, ok := fresh[key]
		if !ok {
			c, ok = s.rows[key]
			if ok {
				c.row = refreshAge(c.columns, c.row, p.obj, t.now())
			}
		}
		if p.typ == watch.Deleted || p.deleted {
			delete(s.rows, key)
		} else if ok {
			c.listed = false
			s.rows[key] = c
		}
		t.mu.Unlock()
		if !ok || s.fallback {
			c = t.syntheticRow(s, p.obj)
		}
		typs := []watch.EventType{p.typ}
		if p.deleted {
			typs = append(typs, watch.Deleted)
		}
		for _, typ := range typs {
			if run != nil && (run.typ != typ || !reflect.DeepEqual(run.columns, c.columns)) {
				t.printRows(s, run)
				run = nil
			}
			if run == nil {
				run = &rowRun{typ: typ, columns: c.columns}
			}
			run.rows = append(run.rows, c.row)
		}
	}
	if run != nil {
		t.printRows(s, run)
	}
	_ = s.tw.Flush()
	if s.buf.Len() > 0 {
		t.out.writeLine(t.out.out, strings.TrimSuffix(s.buf.String(), "\n"))
		s.buf.Reset()
	}
}

// setupStream builds the stream's printer from its first object: NAMESPACE
// for a namespaced resource watched in more than one namespace, kind/name
// when more than one resource is watched.
func (t *tableOutput) setupStream(s *tableStream, first *unstructured.Unstructured) {
	opts := printers.PrintOptions{
		Wide:          t.wide,
		WithNamespace: first.GetNamespace() != "" && len(s.namespaces) != 1,
	}
	if t.withKind {
		gk := first.GroupVersionKind().GroupKind()
		if gk.Kind == "" && t.kindOf != nil {
			gk = t.kindOf(s.key.gvr)
		}
		if gk.Kind != "" {
			opts.WithKind, opts.Kind = true, gk
		}
	}
	s.printer = printers.NewTablePrinter(opts)
	s.tw = printers.GetNewTabWriter(&s.buf)
	s.setupDone = true
}

// rowRun is rows of one event type under one column set, printed as one
// table so that kubectl's printer aligns them together.
type rowRun struct {
	typ     watch.EventType
	columns []metav1.TableColumnDefinition
	rows    []metav1.TableRow
}

// printRows prints a run of rows through the stream's kubectl table
// printer, which prints the header before the first row and again when
// the columns change.
func (t *tableOutput) printRows(s *tableStream, run *rowRun) {
	rows := make([]metav1.TableRow, len(run.rows))
	for i, r := range run.rows {
		rows[i] = r
		rows[i].Cells = append([]any(nil), r.Cells...) // the printer rewrites cells (kind/name)
	}
	columns := run.columns
	if t.cluster != "" {
		columns = append([]metav1.TableColumnDefinition{{Name: "Cluster", Type: "string"}}, columns...)
		for i := range rows {
			rows[i].Cells = append([]any{t.cluster}, rows[i].Cells...)
		}
	}
	table := &metav1.Table{ColumnDefinitions: columns, Rows: rows}
	ev := &metav1.WatchEvent{Type: string(run.typ), Object: runtime.RawExtension{Object: table}}
	if err := s.printer.PrintObj(ev, s.tw); err != nil {
		t.out.info("crd-watcher: %s: cannot print rows: %v", gvrString(s.key.gvr), err)
	}
}

// requestFailed handles a failed Table request: a server that refuses
// Table switches the stream to NAME and AGE; other failures are reported
// once per resource (its rows are then built from what is known).
func (t *tableOutput) requestFailed(s *tableStream, err error) {
	if errors.Is(err, errNotTable) || apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) {
		s.fallback = true
		t.out.info("crd-watcher: %s: the server does not serve it as a Table (%v); printing NAME and AGE for it", gvrString(s.key.gvr), err)
		return
	}
	if s.warned || t.ctx.Err() != nil {
		return
	}
	s.warned = true
	t.out.info("crd-watcher: %s: cannot fetch table rows (%v); printing what is known (name, age) until the server answers", gvrString(s.key.gvr), err)
}

// defaultColumns are the columns of a resource that has no Table: the ones
// kubectl prints for it.
var defaultColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name"},
	{Name: "Age", Type: "string"},
}

// syntheticRow builds a row from the informer's object under the stream's
// last columns (NAME and AGE if none): the name and age cells, the others
// empty.
func (t *tableOutput) syntheticRow(s *tableStream, u *unstructured.Unstructured) cachedRow {
	cols := s.columns
	if s.fallback || len(cols) == 0 {
		cols = defaultColumns
	}
	row := metav1.TableRow{Cells: make([]any, len(cols)), Object: runtime.RawExtension{Object: slimObject(u)}}
	for i, c := range cols {
		if c.Format == "name" && c.Type == "string" {
			row.Cells[i] = u.GetName()
		}
	}
	return cachedRow{columns: cols, row: refreshAge(cols, row, u, t.now())}
}

// refreshAge sets the Age cell (the column kubectl and the server call
// "Age") to the object's age now, as the server would compute it.
func refreshAge(cols []metav1.TableColumnDefinition, row metav1.TableRow, u *unstructured.Unstructured, now time.Time) metav1.TableRow {
	for i, c := range cols {
		if c.Name != "Age" || i >= len(row.Cells) {
			continue
		}
		cells := append([]any(nil), row.Cells...)
		ts := u.GetCreationTimestamp()
		if ts.IsZero() {
			cells[i] = "<unknown>"
		} else {
			cells[i] = duration.HumanDuration(now.Sub(ts.Time))
		}
		row.Cells = cells
	}
	return row
}

// slimObject keeps what the printer reads from a row's object: namespace
// and name (the cached rows hold no labels, annotations or managedFields).
func slimObject(u metav1.Object) *unstructured.Unstructured {
	s := &unstructured.Unstructured{Object: map[string]any{}}
	s.SetName(u.GetName())
	if ns := u.GetNamespace(); ns != "" {
		s.SetNamespace(ns)
	}
	return s
}

// get fetches the row of one object.
func (t *tableOutput) get(s *tableStream, u *unstructured.Unstructured) (cachedRow, error) {
	table, err := t.request(func(ctx context.Context) ([]byte, error) {
		return t.client.get(ctx, s.key.gvr, u.GetNamespace(), u.GetName())
	})
	if err != nil {
		return cachedRow{}, err
	}
	s.columns = table.ColumnDefinitions
	for _, r := range table.Rows {
		if m, ok := r.Object.Object.(metav1.Object); ok && m.GetName() == u.GetName() {
			return cachedRow{columns: table.ColumnDefinitions, row: r}, nil
		}
	}
	return cachedRow{}, apierrors.NewNotFound(s.key.gvr.GroupResource(), u.GetName())
}

// list fetches the rows of every object the stream's informer watches:
// one paged LIST per namespace (one for all namespaces).
func (t *tableOutput) list(s *tableStream) (map[string]cachedRow, error) {
	rows := map[string]cachedRow{}
	namespaces := s.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		cont := ""
		for {
			table, err := t.request(func(ctx context.Context) ([]byte, error) {
				return t.client.list(ctx, s.key.gvr, ns, s.key.label, s.key.field, tableListPage, cont)
			})
			if err != nil {
				return nil, err
			}
			s.columns = table.ColumnDefinitions
			for _, r := range table.Rows {
				if m, ok := r.Object.Object.(metav1.Object); ok {
					key := m.GetName()
					if m.GetNamespace() != "" {
						key = m.GetNamespace() + "/" + key
					}
					rows[key] = cachedRow{columns: table.ColumnDefinitions, row: r, listed: true}
				}
			}
			if cont = table.Continue; cont == "" {
				break
			}
		}
	}
	return rows, nil
}

// request runs one Table request in a concurrency slot, bounded by the
// request timeout, and decodes the answer.
func (t *tableOutput) request(do func(context.Context) ([]byte, error)) (*metav1.Table, error) {
	select {
	case t.sem <- struct{}{}:
	case <-t.ctx.Done():
		return nil, t.ctx.Err()
	}
	defer func() { <-t.sem }()
	ctx, cancel := context.WithTimeout(t.ctx, t.timeout)
	defer cancel()
	body, err := do(ctx)
	if err != nil {
		return nil, err
	}
	return decodeTable(body)
}

// errNotTable: the server answered with something other than a Table (a
// server or aggregated API that cannot convert to Table).
var errNotTable = errors.New("the answer is not a Table")

// decodeTable decodes a meta.k8s.io/v1 Table and the metadata of each row
// (kubectl's decodeIntoTable does the same, so that integer cells stay
// int64).
func decodeTable(body []byte) (*metav1.Table, error) {
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotTable, err)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GroupVersionKind() != metav1.SchemeGroupVersion.WithKind("Table") {
		return nil, fmt.Errorf("%w: got %s", errNotTable, obj.GetObjectKind().GroupVersionKind())
	}
	table := &metav1.Table{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, table); err != nil {
		return nil, fmt.Errorf("decode Table: %w", err)
	}
	for i := range table.Rows {
		r := &table.Rows[i]
		if r.Object.Raw == nil {
			continue
		}
		o, err := runtime.Decode(unstructured.UnstructuredJSONScheme, r.Object.Raw)
		if err != nil {
			return nil, fmt.Errorf("decode Table row: %w", err)
		}
		m, ok := o.(metav1.Object)
		if !ok {
			continue
		}
		r.Object = runtime.RawExtension{Object: slimObject(m)}
	}
	return table, nil
}

// tableClient sends the Table requests; the production one is restTable.
type tableClient interface {
	get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) ([]byte, error)
	list(ctx context.Context, gvr schema.GroupVersionResource, namespace, label, field string, limit int64, cont string) ([]byte, error)
}
