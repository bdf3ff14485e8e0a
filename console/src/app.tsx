export function App() {
  return <main><h1>Coffer</h1></main>
}
