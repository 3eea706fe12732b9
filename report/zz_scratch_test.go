package report

import (
	"os"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/zoo"
)

func TestZZScratch(t *testing.T) {
	r := planZoo(t, "bert-large", zoo.Config{SeqLen: 512, WeightsAsInputs: true}, 32, 0.5)
	h := string(render(t, HTML, r))
	os.WriteFile("/tmp/bl.html", []byte(h), 0o644)
	os.WriteFile("/tmp/bl.svg", render(t, SVG, r), 0o644)
	inj := `<script>
var svg=document.querySelector('svg.timeline'); var b=svg.getBoundingClientRect();
var ev=new MouseEvent('mousemove',{clientX:b.left+b.width*0.6, clientY:b.top+b.height*0.62, bubbles:true});
svg.dispatchEvent(ev); document.body.setAttribute('data-tip', document.getElementById('tip').textContent);
document.querySelector('.toggle button[data-axis=index]').click();
</script></body>`
	os.WriteFile("/tmp/bl-hover.html", []byte(strings.Replace(h, "</body>", inj, 1)), 0o644)
	s := string(render(t, HTML, smallReport(t)))
	os.WriteFile("/tmp/small.html", []byte(s), 0o644)
	os.WriteFile("/tmp/small.svg", render(t, SVG, smallReport(t)), 0o644)
}
