#!/usr/bin/python3
"""Run every policy's plans of exports no test was written for, and compare.

Usage: /usr/bin/python3 scripts/unseen_runs.py TSPLITC MODEL.onnx:BATCH ...

For each model the unplanned step is planned (policy base) and run on the
CPU device (tsplitc run --save-outputs). Then every policy plans the step
into 100, 80, 65, 50, 40, 30, 25, 20, 15 and 10 % of its unplanned peak,
and each plan that fits is run the same way. Reported as problems: a
crash (panic or internal error instead of "no plan fits"), a run that
fails, a measured device peak over the budget or unequal to the plan's
peak, an output not bit-equal to the unplanned step's (moDNN's
sub-batched step is exempt: it is another step by design, docs/training.md),
tsplit missing where another policy fits, another policy (not moDNN) faster
than tsplit, and tsplit slower at a larger budget. Exit status 1 when any.
Small batches keep the CPU runs short (about a minute a model at 224²).
"""
import json, subprocess, sys, os, re, filecmp, shutil
T = sys.argv[1]
POL=["tsplit","tsplit-nosplit","base","vdnn-conv","vdnn-all","checkpoint","superneurons","capuchin","modnn","tflms"]
PCT=[100,80,65,50,40,30,25,20,15,10]
def sh(a): return subprocess.run(a,capture_output=True,text=True)
bad_all = 0
for spec in sys.argv[2:]:
    path,b=spec.split(':'); name=os.path.basename(path)
    w=os.path.join(os.environ.get('TMPDIR', '/tmp'), 'tsplit-unseen-runs', name); shutil.rmtree(w,ignore_errors=True); os.makedirs(w)
    r=sh([T,'plan',path,'--batch',b,'--policy','base','-o',f'{w}/base.onnx','--json'])
    peak=json.loads(r.stdout)['base_peak_bytes']
    r=sh([T,'run',f'{w}/base.onnx','--batch',b,'--save-outputs',f'{w}/out-base'])
    assert r.returncode==0, r.stderr
    outs=sorted(os.listdir(f'{w}/out-base'))
    bad=0; n=0; steps={}
    for pct in PCT:
        budget=peak*pct//100
        for pol in POL:
            o=f'{w}/{pol}-{pct}.onnx'
            r=sh([T,'plan',path,'--batch',b,'--memory',str(budget),'--policy',pol,'-o',o,'--json'])
            if r.returncode!=0:
                if 'panic' in r.stderr or 'internal' in r.stderr: print('CRASH',name,pol,pct,r.stderr[-300:]); bad+=1
                continue
            d=json.loads(r.stdout); steps[(pct,pol)]=d['step_s']
            od=f'{w}/out-{pol}-{pct}'
            rr=sh([T,'run',o,'--batch',b,'--save-outputs',od])
            if rr.returncode!=0: print('RUNFAIL',name,pol,pct,rr.stderr[-300:]); bad+=1; continue
            m=re.search(r'peak device .*?\((\d+) bytes',rr.stdout+rr.stderr)
            meas=int(m.group(1))
            if meas>budget or meas!=d['peak_bytes']: print('PEAK',name,pol,pct,meas,budget,d['peak_bytes']); bad+=1
            diff=[f for f in outs if f.endswith('.npy') and not filecmp.cmp(f'{w}/out-base/{f}',f'{od}/{f}',shallow=False)]
            if diff and pol!='modnn': print('DIFF',name,pol,pct,len(diff),diff[:3]); bad+=1
            n+=1
            os.remove(o); shutil.rmtree(od)
    # tsplit never slower than another policy (modnn here sub-batches: excluded like the sweep's comparison set)
    for pct in PCT:
        if (pct,'tsplit') not in steps:
            others=[p for p in POL if (pct,p) in steps and p!='modnn']
            if others: print('TSPLIT-MISSING',name,pct,others); bad+=1
            continue
        t=steps[(pct,'tsplit')]
        for p in POL:
            if p not in ('tsplit','modnn') and (pct,p) in steps and steps[(pct,p)]<t-1e-12: print('BEATEN',name,pct,p,steps[(pct,p)],t); bad+=1
    ts=[(pct,steps[(pct,'tsplit')]) for pct in PCT if (pct,'tsplit') in steps]
    for (p1,a),(p2,c) in zip(ts,ts[1:]):
        if a>c+1e-12: print('NONMONO',name,p1,a,p2,c); bad+=1
    bad_all += bad
    print(name,'b'+b,'plans run',n,'problems',bad,'smallest tsplit budget',ts[-1][0] if ts else None,'%', flush=True)
sys.exit(1 if bad_all else 0)
