//go:build ignore

// Writes vectors.txt: inputs and the order Go's sort.Sort leaves them in, for the Rust port's
// test. Keys repeat on purpose: ties are what the port must place exactly as Go does.
// Run: go run gen_vectors.go > vectors.txt
package main

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
)

type item struct{ key, id int }

type byKey []item

func (s byKey) Len() int           { return len(s) }
func (s byKey) Less(i, j int) bool { return s[i].key < s[j].key }
func (s byKey) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }

// Every length up to 40, then lengths that reach the ninther pivot, partial insertion
// shifting and deeper recursion.
func sizes() []int {
	var out []int
	for n := 0; n <= 40; n++ {
		out = append(out, n)
	}
	return append(out, 50, 51, 64, 80, 100, 128)
}

func main() {
	r := rand.New(rand.NewSource(20261203))
	fmt.Println("# keys | ids after sort.Sort (ids are input positions)")
	for _, n := range sizes() {
		for _, distinct := range []int{1, 2, 5, 1000} {
			for shape := 0; shape < 4; shape++ {
				s := make(byKey, n)
				for i := range s {
					switch shape {
					case 0:
						s[i].key = r.Intn(distinct)
					case 1: // ascending with ties
						s[i].key = i * distinct / (n + 1)
					case 2: // descending with ties
						s[i].key = (n - i) * distinct / (n + 1)
					default: // organ pipe
						s[i].key = min(i, n-i) % distinct
					}
					s[i].id = i
				}
				keys := make([]string, n)
				for i, it := range s {
					keys[i] = fmt.Sprint(it.key)
				}
				sort.Sort(s)
				ids := make([]string, n)
				for i, it := range s {
					ids[i] = fmt.Sprint(it.id)
				}
				fmt.Printf("%s|%s\n", strings.Join(keys, " "), strings.Join(ids, " "))
			}
		}
	}
}
