"""Per-opcode totals of one kernel block of an ncu SourceCounters export (source.csv.gz):
warp-stall samples, executed warp instructions, shared-memory wavefronts (and their ideal).
    python3 opcodes.py source.csv.gz BLOCK_INDEX"""
import csv, gzip, sys, collections, re
rows = list(csv.reader(gzip.open(sys.argv[1], 'rt')))
want = int(sys.argv[2])  # index of kernel block
blocks=[]; cur=None
for r in rows:
    if r and r[0]=='Kernel Name':
        cur={'name':r[1],'rows':[]}; blocks.append(cur); continue
    if r and r[0]=='Address': cur['hdr']=r; continue
    if cur and r: cur['rows'].append(r)
b=blocks[want]; h=b['hdr']; ix={k:i for i,k in enumerate(h)}
print(b['name'], len(b['rows']))
agg=collections.defaultdict(lambda: collections.Counter())
tot=collections.Counter()
stalls=[k for k in h if k.startswith('stall_') and 'Not Issued' not in k]
for r in b['rows']:
    op=r[1].strip().split()[0] if r[1].strip() else '?'
    if op.startswith('@'): op=r[1].strip().split()[1]
    op=op.split('.')[0]
    c=agg[op]
    def num(k):
        try: return float(r[ix[k]])
        except: return 0.0
    c['samples']+=num('# Samples'); c['inst']+=num('Instructions Executed'); c['wf']+=num('L1 Wavefronts Shared'); c['wfi']+=num('L1 Wavefronts Shared Ideal')
    for s in stalls: c[s]+=num(s); tot[s]+=num(s)
    tot['samples']+=num('# Samples'); tot['inst']+=num('Instructions Executed'); tot['wf']+=num('L1 Wavefronts Shared')
print('total samples %d inst %d wavefronts %d'%(tot['samples'],tot['inst'],tot['wf']))
print('stalls:', ', '.join('%s %.1f%%'%(s[6:],100*tot[s]/tot['samples']) for s in sorted(stalls,key=lambda s:-tot[s])[:8]))
for op,c in sorted(agg.items(), key=lambda kv:-kv[1]['samples'])[:22]:
    top=sorted(stalls,key=lambda s:-c[s])[:3]
    print('%-10s samp %5.1f%% inst %10d wf %10d (ideal %10d)  %s'%(op,100*c['samples']/tot['samples'],c['inst'],c['wf'],c['wfi'],' '.join('%s:%d'%(s[6:],c[s]) for s in top)))
