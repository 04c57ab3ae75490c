package query

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Operator is a predicate's comparison.
type Operator string

// The operators. A path with [*] reaches several values; a predicate holds
// when any of them satisfies it, except != and notin, which hold when none
// of them equals the literal(s) (so a missing field satisfies != and notin,
// as in Kubernetes field selectors).
const (
	Eq     Operator = "="
	Ne     Operator = "!="
	In     Operator = "in"
	NotIn  Operator = "notin"
	Lt     Operator = "<"
	Gt     Operator = ">"
	Le     Operator = "<="
	Ge     Operator = ">="
	Exists Operator = "exists" // the path reaches a value other than null
	Prefix Operator = "prefix" // a string value starts with the literal's text
	// Contains: a string value contains the literal's text, or a list
	// value has an element equal to the literal.
	Contains Operator = "contains"
)

// arity is how many literals each operator takes: -1 for one or more.
var arity = map[Operator]int{
	Eq: 1, Ne: 1, In: -1, NotIn: -1, Lt: 1, Gt: 1, Le: 1, Ge: 1,
	Exists: 0, Prefix: 1, Contains: 1,
}

// Predicate is one condition on a field: Path (see ParsePath), an
// operator and its literals.
type Predicate struct {
	Path   string
	Op     Operator
	Values []Value
}

// Order is one sort field. Items are sorted by the first Order, then the
// next, and ties are always broken by the object's key
// (namespace/name, ascending), so an order is total. A path that reaches
// several values sorts by the first; values of different types sort as
// missing < null < false < true < numbers < strings. Timestamps are
// strings in Kubernetes objects (RFC 3339, UTC), which sort in time order.
type Order struct {
	Path       string
	Descending bool
}

// Asc and Desc make an Order.
func Asc(path string) Order  { return Order{Path: path} }
func Desc(path string) Order { return Order{Path: path, Descending: true} }

// Query is a question to a cache, as a value: which objects (namespaces,
// label selector, predicates), in which order, how many, and from where
// (a continue token). The zero Query asks for every object, ordered by
// key. A Query is a plain value: copy it, compare its String, build it with
// the methods below (each returns a modified copy) or read it from its
// string form with Parse.
type Query struct {
	// Namespaces: objects in any of them; none means all namespaces.
	Namespaces []string
	// LabelSelector in Kubernetes syntax ("app=web,tier in (a,b)"); "" selects everything.
	LabelSelector string
	// Predicates all hold on every returned object.
	Predicates []Predicate
	// OrderBy: the sort fields; none means by key.
	OrderBy []Order
	// Limit: at most this many items in a page; 0 means no limit.
	Limit int
	// Continue: the token of the previous page; "" for the first page.
	Continue string
	// Count asks for Page.Total.
	Count bool
}

// New returns the zero Query, for building.
func New() Query { return Query{} }

// InNamespaces adds namespaces.
func (q Query) InNamespaces(ns ...string) Query {
	q.Namespaces = append(slices.Clip(q.Namespaces), ns...)
	return q
}

// WithLabels sets the label selector.
func (q Query) WithLabels(selector string) Query { q.LabelSelector = selector; return q }

// Where adds a predicate.
func (q Query) Where(path string, op Operator, values ...Value) Query {
	q.Predicates = append(slices.Clip(q.Predicates), Predicate{Path: path, Op: op, Values: values})
	return q
}

// SortBy adds sort fields.
func (q Query) SortBy(orders ...Order) Query {
	q.OrderBy = append(slices.Clip(q.OrderBy), orders...)
	return q
}

// WithLimit sets the page size.
func (q Query) WithLimit(n int) Query { q.Limit = n; return q }

// After sets the continue token.
func (q Query) After(token string) Query { q.Continue = token; return q }

// WithCount asks for the total.
func (q Query) WithCount() Query { q.Count = true; return q }

// Page is one page of a query's answer.
//
// Items are the cache's own objects (shared with the cache and with event
// handlers: never modify them). Continue is "" on the last page.
// ResourceVersion is the version the walk is read at: the highest
// resourceVersion the cache had seen when the first page was read (the
// same on every page of a walk; see the paging guarantee in the package
// documentation). Total, only when Query.Count, is the number of objects
// matching the query in the cache now, on all pages.
type Page[T any] struct {
	Items           []T
	Continue        string
	ResourceVersion string
	Total           *int
}

// Validate checks q without running it; it returns the error Run would.
func (q Query) Validate() error {
	_, err := compile(q)
	return err
}

// cpred is a compiled predicate.
type cpred struct {
	steps []step
	op    Operator
	vals  []Value
}

// corder is a compiled sort field.
type corder struct {
	steps []step
	desc  bool
}

// plan is a compiled query.
type plan struct {
	namespaces []string // sorted, distinct; nil for all
	selector   labels.Selector
	preds      []cpred
	orders     []corder
	orderSig   string // the order's canonical spelling (the index key)
	hash       string // identifies the query across pages
	limit      int
	count      bool
	cursor     *cursor
	partField  string // see compileWith
}

func compile(q Query) (*plan, error) { return compileWith(q, "") }

// compileWith compiles q for a partitioned cache whose part names are
// read at the one-step path partField (see ScanParts); "" for a cache
// of one part.
func compileWith(q Query, partField string) (*plan, error) {
	p := &plan{limit: q.Limit, count: q.Count, partField: partField}
	if q.Limit < 0 {
		return nil, newError(ErrInvalidValue, "limit", strconv.Itoa(q.Limit), "must not be negative")
	}
	var canon strings.Builder
	if len(q.Namespaces) > 0 {
		ns := slices.Clone(q.Namespaces)
		slices.Sort(ns)
		p.namespaces = slices.Compact(ns)
	}
	canon.WriteString("ns=" + strings.Join(p.namespaces, ",") + "\n")
	if q.LabelSelector != "" {
		sel, err := labels.Parse(q.LabelSelector)
		if err != nil {
			return nil, newError(ErrInvalidValue, "labelSelector", q.LabelSelector, err.Error())
		}
		if !sel.Empty() {
			p.selector = sel
			canon.WriteString("l=" + sel.String() + "\n")
		}
	}
	for _, pr := range q.Predicates {
		path, err := ParsePath(pr.Path)
		if err != nil {
			err.(*Error).Param = "where"
			return nil, err
		}
		n, ok := arity[pr.Op]
		if !ok {
			return nil, newError(ErrUnknownOperator, "where", string(pr.Op), "operators: = != in notin < > <= >= exists prefix contains")
		}
		if (n >= 0 && len(pr.Values) != n) || (n < 0 && len(pr.Values) == 0) {
			return nil, newError(ErrInvalidValue, "where", path.text+" "+string(pr.Op), "wrong number of values")
		}
		canon.WriteString("w=" + path.text + " " + string(pr.Op))
		for _, v := range pr.Values {
			if v.kind == kindNumber && (v.num != v.num || v.num > 1e308 || v.num < -1e308) {
				return nil, newError(ErrInvalidValue, "where", v.text, "not a finite number")
			}
			canon.WriteString(" " + strconv.Itoa(int(v.kind)) + ":" + strconv.Quote(v.text))
		}
		canon.WriteString("\n")
		p.preds = append(p.preds, cpred{steps: path.steps, op: pr.Op, vals: pr.Values})
	}
	var sig strings.Builder
	for _, o := range q.OrderBy {
		path, err := ParsePath(o.Path)
		if err != nil {
			err.(*Error).Param = "orderBy"
			return nil, err
		}
		if o.Descending {
			sig.WriteString("-")
		}
		sig.WriteString(path.text + "\n")
		p.orders = append(p.orders, corder{steps: path.steps, desc: o.Descending})
	}
	p.orderSig = sig.String()
	canon.WriteString("o=" + p.orderSig)
	if partField != "" {
		canon.WriteString("\np=" + partField)
	}
	h := fnv.New64a()
	h.Write([]byte(canon.String()))
	p.hash = strconv.FormatUint(h.Sum64(), 36)
	if q.Continue != "" {
		c, err := decodeToken(q.Continue, p)
		if err != nil {
			return nil, err
		}
		p.cursor = c
	}
	return p, nil
}
