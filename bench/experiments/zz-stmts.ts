// throwaway: pg_stat_statements + table stats for N transfers with the journal on
import { sql } from 'kysely'
import { processTreeCpuMs } from '../cpu.ts'
import { buildAppAt, injector, signUpWithKey } from '../in-process.ts'
import { startPostgres } from '../postgres.ts'
process.env.BENCH_PG_STATEMENTS = '1'
const ADMIN = 'cfa_transfer_cpu_bench_admin_key_not_a_secret'
const N = Number(process.argv[2] ?? 4000)
const server = await startPostgres()
const url = await server.createDatabase('stm' + Date.now().toString(36))
const built = await buildAppAt(process.cwd(), ADMIN, url, 'zz')
const call = injector(built.app)
const db = built.database.db
const admin = { authorization: `Bearer ${ADMIN}` }
const gold = await call({ method: 'POST', url: '/assets', headers: admin, payload: { name: 'gold', value: 1 } }, 201)
const wallets = []
for (let i = 0; i < 50; i++) { const w = await signUpWithKey(call, `u${i}`); await call({ method: 'POST', url: `/wallets/${w.walletId}/assets`, headers: admin, payload: { id: gold.id, quantity: 1e9 } }, 201); wallets.push(w) }
await sql`create extension if not exists pg_stat_statements`.execute(db)
await new Promise((r) => setTimeout(r, 1000))
await sql`select pg_stat_statements_reset()`.execute(db)
const cpu0 = processTreeCpuMs(server.pid)
let left = N
await Promise.all(Array.from({ length: 32 }, async () => { while (left-- > 0) { const from = wallets[Math.floor(Math.random()*50)]; let to = from; while (to === from) to = wallets[Math.floor(Math.random()*50)]
  const r = await built.app.inject({ method: 'POST', url: '/wallet/transactions', headers: { authorization: `Bearer ${from.key}`, 'content-type': 'application/json' }, payload: JSON.stringify({ recipient: String(to.walletId), type: 2, assets: { gold: 1 } }) }); if (r.statusCode !== 201) throw new Error(r.body) } }))
await new Promise((r) => setTimeout(r, 1500))
const cpu = processTreeCpuMs(server.pid) - cpu0
console.log(`server CPU ${(cpu * 1000 / N).toFixed(0)} µs/transfer`)
const { rows } = await sql<any>`select calls, rows, round(total_exec_time::numeric,1) as ms, round((total_exec_time*1000/${N})::numeric,1) as us_per_tr, wal_records, left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 130) as q from pg_stat_statements order by total_exec_time desc limit 40`.execute(db)
for (const r of rows) console.log(`${String(r.us_per_tr).padStart(7)} µs/tr ${String(r.calls).padStart(6)} calls ${String(r.rows).padStart(6)} rows wal ${String(r.wal_records).padStart(6)}  ${r.q}`)
const t = await sql<any>`select relname, n_tup_ins, n_tup_del, n_tup_hot_upd, n_tup_upd, autovacuum_count, autoanalyze_count from pg_stat_user_tables order by n_tup_ins + n_tup_upd + n_tup_del desc limit 15`.execute(db)
for (const r of t.rows) console.log(JSON.stringify(r))
await built.close(); await server.stop()
