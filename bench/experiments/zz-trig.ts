// throwaway: the queue trigger's cost on inserts of 16 rows a statement
import pg from 'pg'
import { startPostgres } from '../postgres.ts'
import { processTreeCpuMs } from '../cpu.ts'
const server = await startPostgres()
const url = await server.createDatabase('trig' + Date.now().toString(36))
const c = new pg.Client({ connectionString: url }); await c.connect()
await c.query(`create table tx (id bigserial primary key, a bigint, b bigint, memo text)`)
await c.query(`create table q (transaction_id bigint primary key)`)
await c.query(`create function qf() returns trigger language plpgsql as $$ begin insert into q (transaction_id) select id from inserted; return null; end $$`)
const ROWS = 16, STMTS = Number(process.argv[2] ?? 3000)
const text = `insert into tx (a, b, memo) select a, b, m from unnest($1::bigint[], $2::bigint[], $3::text[]) as r(a, b, m)`
const direct = `with w as (insert into tx (a, b, memo) select a, b, m from unnest($1::bigint[], $2::bigint[], $3::text[]) as r(a, b, m) returning id) insert into q select id from w`
const a = Array.from({ length: ROWS }, (_, i) => i), m = a.map(() => 'memo')
async function run(label: string, sql: string) {
  const cpu0 = processTreeCpuMs(server.pid)
  for (let i = 0; i < STMTS; i++) { await c.query('begin'); await c.query({ name: label, text: sql, values: [a, a, m] }); await c.query('commit') }
  const cpu = processTreeCpuMs(server.pid) - cpu0
  await c.query('truncate q')
  return (cpu * 1000) / (STMTS * ROWS)
}
await c.query(`set synchronous_commit = off`)
const res: Record<string, number[]> = { none: [], trigger: [], direct: [] }
for (let r = 0; r < 5; r++) {
  await c.query(`drop trigger if exists qt on tx`)
  res.none.push(await run('none' , text))
  await c.query(`create trigger qt after insert on tx referencing new table as inserted for each statement execute function qf()`)
  res.trigger.push(await run('trig', text))
  await c.query(`drop trigger if exists qt on tx`)
  res.direct.push(await run('direct', direct))
}
for (const [k, v] of Object.entries(res)) console.log(k, v.map((x) => x.toFixed(1)).join(' '), 'µs/row server CPU')
await c.end(); await server.stop()
