package dockershim

import (
	"sync"
	"testing"
)

func TestKeyLock(t *testing.T) {
	t.Parallel()
	var k keyLock
	var wg sync.WaitGroup
	inside := 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := k.lock("img")
			inside++
			if inside != 1 {
				t.Errorf("%d holders of one key", inside)
			}
			inside--
			unlock()
		}()
	}
	wg.Wait()
	u1 := k.lock("a")
	u2 := k.lock("b") // other keys do not wait
	u1()
	u2()
	if len(k.locks) != 0 {
		t.Fatalf("entries left: %v", k.locks)
	}
}
